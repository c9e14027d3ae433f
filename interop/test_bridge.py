"""Bridges to real remote brokers: Debian's Mosquitto, and another tolk.

Each test starts its own brokers on free loopback ports in a temporary directory, publishes
with paho on one side and asserts, byte for byte, what arrives on the other. Waits are for
events (a message, a state in /api/bridges), except the outage, whose length is the point.
"""

import subprocess
import time

import pytest
import requests

from bridging import WAIT, Client, Mosquitto, bridged_tolk, bridges, one_copy_each_side, refused_and_unaffected, wait_for
from conftest import Broker


@pytest.mark.parametrize("version", [5, 4])
def test_messages_cross_to_and_from_mosquitto_once_each(tmp_path, version):
    remote = Mosquitto(tmp_path, f"log_dest stderr\nlog_dest file {tmp_path}/mosquitto.log").start()
    tolk = bridged_tolk(
        tmp_path / "tolk",
        "gw1",
        f"mqtt://127.0.0.1:{remote.port}",
        ["sensors/# out 1", "cmd/# in 1 site1/ ''"],
        f"mqtt_version = {version}\n",
    )
    try:
        wait_for("the bridge up", lambda: bridges(tolk)["up"]["state"] == "up")
        far = Client(remote.port, "far")
        far.subscribe("#")
        near = Client(tolk.port("mqtt"), "near")
        near.subscribe("#")
        for i in range(100):
            near.publish(f"sensors/{i}", f"reading {i}".encode())
            far.publish(f"cmd/{i}", bytes([i, 0, 255]))
        near.publish("sensors/end", b"")
        far.publish("cmd/end", b"")

        at_far = [m for m in far.until("sensors/end") if m[0].startswith("sensors/")]
        assert at_far == [(f"sensors/{i}", f"reading {i}".encode()) for i in range(100)]
        at_near = [m for m in near.until("site1/cmd/end") if m[0].startswith("site1/")]
        assert at_near == [(f"site1/cmd/{i}", bytes([i, 0, 255])) for i in range(100)]
        wait_for(
            "both counts",
            lambda: (bridges(tolk)["up"]["messages_out"], bridges(tolk)["up"]["messages_in"]) == (101, 101),
        )
        near.close()
        far.close()
    finally:
        tolk.stop()
        remote.stop()
    # Mosquitto names the protocol a client connected with: p2 is 3.1.1, p5 is 5.
    level = {5: "p5", 4: "p2"}[version]
    assert f"as tolk-gw1-up ({level}," in (tmp_path / "mosquitto.log").read_text()


@pytest.fixture
def outage(tmp_path):
    """A tolk bridged to a Mosquitto (`sensors/# out 1`) that has just gone away, with a
    persistent subscriber to sensors/# there (its subscription outlives Mosquitto's restart).
    Yields (remote, tolk), the bridge down."""
    remote = Mosquitto(tmp_path).start()
    tolk = bridged_tolk(tmp_path / "tolk", "gw1", f"mqtt://127.0.0.1:{remote.port}", ["sensors/# out 1"])
    try:
        wait_for("the bridge up", lambda: bridges(tolk)["up"]["state"] == "up")
        far = Client(remote.port, "far", clean=False)
        far.subscribe("sensors/#")
        far.close()
        remote.stop()
        wait_for("the bridge down", lambda: bridges(tolk)["up"]["state"] == "down")
        yield remote, tolk
    finally:
        tolk.stop()
        remote.stop()


def test_an_outage_of_30_seconds_loses_no_qos1_message(outage):
    remote, tolk = outage
    down_at = time.monotonic()  # the remote stopped before this: the outage is longer
    near = Client(tolk.port("mqtt"), "near")
    sent = 0
    while time.monotonic() - down_at < 30:
        # QoS 0 first: the PUBACK of the QoS 1 after it says both were taken.
        near.publish("sensors/lossy", b"qos0", qos=0)
        near.publish(f"sensors/{sent}", f"kept {sent}".encode())
        sent += 1
        time.sleep(0.1)
    status = bridges(tolk)["up"]
    assert status["state"] == "down" and status["spool_messages"] == sent, status
    metrics = requests.get(f"http://127.0.0.1:{tolk.port('http')}/metrics", timeout=5).text
    assert f'tolk_messages_dropped_total{{protocol="mqtt",reason="remote_down"}} {sent}' in metrics

    remote.start()
    far = Client(remote.port, "far", clean=False)
    wait_for("the spool drained", lambda: bridges(tolk)["up"]["spool_messages"] == 0)
    near.publish("sensors/end", b"")
    got = [m for m in far.until("sensors/end")]
    expected = [(f"sensors/{i}", f"kept {i}".encode()) for i in range(sent)]
    assert sorted(set(got)) == sorted(expected), f"{len(set(got))} of {sent} arrived"
    near.close()
    far.close()


def test_a_refused_login_is_logged_and_retried_and_the_broker_carries_on(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("")
    subprocess.run(["mosquitto_passwd", "-b", str(passwd), "bridge", "right"], check=True)
    remote = Mosquitto(tmp_path, f"allow_anonymous false\npassword_file {passwd}").start()
    tolk = bridged_tolk(
        tmp_path / "tolk",
        "gw1",
        f"mqtt://127.0.0.1:{remote.port}",
        ["a/# out 1"],
        'username = "bridge"\npassword = "wrong"\n',
    )
    try:
        refused_and_unaffected(tolk)
        # Give the bridge the password it uses: it gets in on a later attempt.
        subprocess.run(["mosquitto_passwd", "-b", str(passwd), "bridge", "wrong"], check=True)
        remote.reload()
        wait_for("the bridge up after a retry", lambda: bridges(tolk)["up"]["state"] == "up")
        log = tolk.log.read_text()
        assert log.count("bridge down") == 1, "one line per reason, not one per attempt"
        assert "bridge up" in log
    finally:
        tolk.stop()
        remote.stop()


def test_two_tolks_bridged_both_ways_make_no_loop(tmp_path):
    (tmp_path / "b").mkdir()
    b = Broker(tmp_path / "b", top='node_name = "b"')
    b.start()
    a = bridged_tolk(tmp_path / "a", "a", f"mqtt://127.0.0.1:{b.port('mqtt')}", ["# both 1"])
    try:
        wait_for("the bridge up", lambda: bridges(a)["up"]["state"] == "up")
        one_copy_each_side(a, b, 50)
    finally:
        a.stop()
        b.stop()

def test_the_spool_survives_a_kill_of_tolk(outage):
    remote, tolk = outage
    near = Client(tolk.port("mqtt"), "near")
    for i in range(50):
        near.publish(f"sensors/{i}", f"spooled {i}".encode())
    near.close()
    # Every PUBACK came after the spool had the message on disk.
    tolk.process.kill()
    tolk.process.wait(10)
    tolk.start()
    assert bridges(tolk)["up"]["spool_messages"] == 50
    remote.start()
    far = Client(remote.port, "far", clean=False)
    got = set()
    while len(got) < 50:
        got.add(far.inbox.get(timeout=WAIT))
    assert got == {(f"sensors/{i}", f"spooled {i}".encode()) for i in range(50)}
    far.close()


def test_bridges_over_tls_trust_the_ca_file(tmp_path):
    """mqtts:// and amqps:// to another tolk's TLS listeners, trusting its CA (ca_file)."""
    (tmp_path / "b").mkdir()
    b = Broker(tmp_path / "b", top='node_name = "b"')
    b.start()
    (tmp_path / "a").mkdir()
    tables = ""
    for name, kind, scheme, section in (("m", "mqtt", "mqtts", "mqtt-tls"), ("q", "amqp", "amqps", "amqp-tls")):
        host = "127.0.0.1" if kind == "mqtt" else "guest:guest@127.0.0.1"
        tables += (
            f'[[bridge]]\nname = "{name}"\nkind = "{kind}"\nurl = "{scheme}://{host}:{b.port(section)}"\n'
            f'ca_file = "{b.ca_file}"\ntopics = ["tls/{name}/# out 1"]\nreconnect_min = "100ms"\n'
        )
    a = Broker(tmp_path / "a", top='node_name = "a"', extra=tables)
    a.start()
    try:
        wait_for("both bridges up", lambda: all(s["state"] == "up" for s in bridges(a).values()))
        at_b = Client(b.port("mqtt"), "at-b")
        at_b.subscribe("tls/#")
        at_a = Client(a.port("mqtt"), "at-a")
        at_a.publish("tls/m/1", b"over mqtts")
        at_a.publish("tls/q/1", b"over amqps")
        got = {at_b.inbox.get(timeout=WAIT), at_b.inbox.get(timeout=WAIT)}
        assert got == {("tls/m/1", b"over mqtts"), ("tls/q/1", b"over amqps")}
        at_a.close()
        at_b.close()
    finally:
        a.stop()
        b.stop()


def test_a_wsn_bridge_between_two_tolks_makes_no_loop(tmp_path):
    """tolk a Subscribes at tolk b's NotificationBroker with its own consumer (on `#`: without a
    Filter) and sends its messages there as Notify; both ways, each side gets one copy of
    everything."""
    (tmp_path / "b").mkdir()
    b = Broker(tmp_path / "b", top='node_name = "b"')
    b.start()
    (tmp_path / "a").mkdir()
    a = Broker(tmp_path / "a", top='node_name = "a"')
    with open(a.config, "a") as config:
        config.write(
            f'[[bridge]]\nname = "up"\nkind = "wsn"\nurl = "http://127.0.0.1:{b.port("http")}/wsn"\n'
            f'local_url = "http://127.0.0.1:{a.port("http")}"\ntopics = ["# both 1"]\nremote_node = "b"\n'
            'reconnect_min = "100ms"\nreconnect_max = "1s"\n'
        )
    a.start()
    try:
        wait_for("the bridge up", lambda: bridges(a)["up"]["state"] == "up")
        one_copy_each_side(a, b, 20)
        metrics = requests.get(f"http://127.0.0.1:{a.port('http')}/metrics", timeout=5).text
        assert 'tolk_messages_dropped_total{protocol="bridge",reason="loop"}' in metrics
    finally:
        a.stop()
        b.stop()
    assert "bridge down" not in a.log.read_text()
