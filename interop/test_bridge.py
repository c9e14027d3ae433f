"""Bridges to real remote brokers: Debian's Mosquitto, and another tolk.

Each test starts its own brokers on free loopback ports in a temporary directory, publishes
with paho on one side and asserts, byte for byte, what arrives on the other. Waits are for
events (a message, a state in /api/bridges), except the outage, whose length is the point.
"""

import queue
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho
import pytest
import requests

from conftest import Broker, free_port

WAIT = 20


class Mosquitto:
    """Debian's Mosquitto on one loopback port, restartable on the same port and with the same
    persistence file (saved when it stops)."""

    def __init__(self, workdir: Path, config=""):
        self.port = free_port()
        self.workdir = workdir
        self.conf = workdir / "mosquitto.conf"
        if "allow_anonymous" not in config:
            config = "allow_anonymous true\n" + config
        # user root: Mosquitto started as root would switch to its own user, which cannot read here.
        self.conf.write_text(
            f"user root\nlistener {self.port} 127.0.0.1\npersistence true\n"
            f"persistence_location {workdir}/\nmax_queued_messages 0\n{config}\n"
        )
        self.process = None

    def start(self):
        binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self.process = subprocess.Popen(
            [binary, "-c", str(self.conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for line in self.process.stdout:
            if line.rstrip().endswith(" running"):
                # Keep reading its output so that it never blocks on a full pipe.
                threading.Thread(target=lambda out=self.process.stdout: [None for _ in out], daemon=True).start()
                return self
        raise RuntimeError(f"mosquitto did not start with {self.conf}")

    def reload(self):
        self.process.send_signal(signal.SIGHUP)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


class Client:
    """A paho client whose messages arrive on a queue as (topic, payload)."""

    def __init__(self, port, client_id, clean=True, version=paho.MQTTv311):
        self.inbox = queue.Queue()
        self.client = paho.Client(
            paho.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version, clean_session=clean
        )
        self.connected = threading.Event()
        self.client.on_connect = lambda c, u, flags, reason, props: self.connected.set()
        self.client.on_message = lambda c, u, m: self.inbox.put((m.topic, m.payload))
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert self.connected.wait(WAIT), f"no CONNACK from port {port}"

    def subscribe(self, topic, qos=1):
        done = threading.Event()
        self.client.on_subscribe = lambda *args: done.set()
        self.client.subscribe(topic, qos)
        assert done.wait(WAIT), "no SUBACK"

    def publish(self, topic, payload, qos=1):
        self.client.publish(topic, payload, qos=qos).wait_for_publish(WAIT)

    def until(self, marker):
        """Everything that arrives before `marker`'s topic."""
        got = []
        while True:
            topic, payload = self.inbox.get(timeout=WAIT)
            if topic == marker:
                return got
            got.append((topic, payload))

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def bridges(tolk):
    r = requests.get(f"http://127.0.0.1:{tolk.port('http')}/api/bridges", timeout=5)
    r.raise_for_status()
    return {b["name"]: b for b in r.json()}


def wait_for(what, check):
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def bridged_tolk(workdir, node, url, topics, settings=""):
    rules = ", ".join(f'"{t}"' for t in topics)
    table = (
        f'[[bridge]]\nname = "up"\nkind = "mqtt"\nurl = "{url}"\ntopics = [{rules}]\n'
        f'reconnect_min = "100ms"\nreconnect_max = "1s"\n{settings}'
    )
    workdir.mkdir(exist_ok=True)
    tolk = Broker(workdir, top=f'node_name = "{node}"', extra=table)
    tolk.start()
    return tolk


def test_messages_cross_to_and_from_mosquitto_once_each(tmp_path):
    remote = Mosquitto(tmp_path).start()
    tolk = bridged_tolk(tmp_path / "tolk", "gw1", f"mqtt://127.0.0.1:{remote.port}", ["sensors/# out 1", "cmd/# in 1 site1/ ''"])
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
        wait_for("the refusal", lambda: "refused" in (bridges(tolk)["up"]["last_error"] or ""))
        assert bridges(tolk)["up"]["state"] == "down"
        # The broker itself is unaffected.
        near = Client(tolk.port("mqtt"), "near")
        near.subscribe("local")
        near.publish("local", b"still here")
        assert near.inbox.get(timeout=WAIT) == ("local", b"still here")
        # Give the bridge the password it uses: it gets in on a later attempt.
        subprocess.run(["mosquitto_passwd", "-b", str(passwd), "bridge", "wrong"], check=True)
        remote.reload()
        wait_for("the bridge up after a retry", lambda: bridges(tolk)["up"]["state"] == "up")
        log = tolk.log.read_text()
        assert log.count("bridge down") == 1, "one line per reason, not one per attempt"
        assert "bridge up" in log
        near.close()
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
        at_a, at_b = Client(a.port("mqtt"), "at-a"), Client(b.port("mqtt"), "at-b")
        at_a.subscribe("data/#")
        at_b.subscribe("data/#")
        for i in range(50):
            at_a.publish(f"data/a/{i}", b"from a")
            at_b.publish(f"data/b/{i}", b"from b")
        at_a.publish("data/end-a", b"")
        at_b.publish("data/end-b", b"")
        for side in (at_a, at_b):
            got = []
            while sum(1 for t, _ in got if t.startswith("data/end")) < 2:
                got.append(side.inbox.get(timeout=WAIT))
            data = [t for t, _ in got if not t.startswith("data/end")]
            assert sorted(data) == sorted([f"data/a/{i}" for i in range(50)] + [f"data/b/{i}" for i in range(50)])
        # Nothing still going round: a last marker is the next thing either side sees.
        at_a.publish("data/last", b"")
        assert at_a.inbox.get(timeout=WAIT)[0] == "data/last"
        assert at_b.inbox.get(timeout=WAIT)[0] == "data/last"
        at_a.close()
        at_b.close()
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
