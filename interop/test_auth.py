"""Users, with third-party clients, against a broker whose `[auth] password_file` is a file
written by Debian's `mosquitto_passwd` and used as it is (crates/auth/tests/fixtures/passwd:
alice / "wonder land" and bob with the default $7$ PBKDF2-SHA512, carol with the older $6$).
For each protocol: the right password is accepted, a wrong one and no login are refused with
the protocol's own answer."""

import subprocess

import paho.mqtt.client as mqtt
import pika
import pytest
import stomp

from conftest import ROOT, Broker, mosquitto, mqtt_connect

PASSWD = ROOT / "crates" / "auth" / "tests" / "fixtures" / "passwd"
TIMEOUT = 10


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory):
    # MQTT-SN logins (by client id) are in test_acl.py, WS-N's in test_wsn_auth.py.
    b = Broker(
        tmp_path_factory.mktemp("tolk-auth"),
        disabled=("mqttsn", "wsn"),
        extra=f'[auth]\npassword_file = "{PASSWD}"\n',
    )
    b.start()
    yield b
    b.stop()
    assert b.process.returncode == 0, b.log.read_text()


def test_mqtt_paho_right_wrong_and_no_password(auth_broker):
    assert mqtt_connect(auth_broker, "alice", "wonder land") == 0
    assert mqtt_connect(auth_broker, "carol", "c@rol") == 0
    # 3.1.1: CONNACK 0x04, which paho names as MQTT 5's 0x86 "Bad user name or password".
    assert str(mqtt_connect(auth_broker, "alice", "wonderland")) == "Bad user name or password"
    assert str(mqtt_connect(auth_broker, None, None)) == "Bad user name or password"
    # MQTT 5: CONNACK 0x86.
    assert mqtt_connect(auth_broker, "bob", "bob", version=mqtt.MQTTv5).value == 0x86


def test_mosquitto_pub_with_u_and_p(auth_broker):
    base = ["mosquitto_pub", "-h", auth_broker.host, "-p", str(auth_broker.port("mqtt")), "-t", "auth/x", "-m", "m"]
    ok = subprocess.run(base + ["-u", "bob", "-P", "b0b!"], capture_output=True, text=True, timeout=TIMEOUT)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(base + ["-u", "bob", "-P", "bob"], capture_output=True, text=True, timeout=TIMEOUT)
    assert bad.returncode != 0 and "password" in bad.stderr.lower(), bad.stderr


def test_stomp_py_login_and_passcode(auth_broker):
    good = stomp.Connection([(auth_broker.host, auth_broker.port("stomp"))])
    good.connect("alice", "wonder land", wait=True)
    assert good.is_connected()
    good.disconnect()
    bad = stomp.Connection([(auth_broker.host, auth_broker.port("stomp"))])
    with pytest.raises(stomp.exception.ConnectFailedException):
        bad.connect("alice", "nope", wait=True)


def test_pika_plain(auth_broker):
    def connect(user, password):
        params = pika.ConnectionParameters(
            host=auth_broker.host, port=auth_broker.port("amqp"), credentials=pika.PlainCredentials(user, password)
        )
        return pika.BlockingConnection(params)

    connection = connect("carol", "c@rol")
    assert connection.is_open
    connection.close()
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        connect("carol", "carol")


def test_a_file_from_tolk_passwd_works_in_mosquitto(tmp_path):
    """`tolk passwd` writes mosquitto_passwd's format: Mosquitto itself checks the hash."""
    from conftest import BINARY

    passwd = tmp_path / "passwd"
    subprocess.run([str(BINARY), "passwd", str(passwd), "dora"], input="dora's pw\n", text=True, check=True)
    subprocess.run([str(BINARY), "passwd", str(passwd), "eve", "--password", "x"], check=True)
    subprocess.run([str(BINARY), "passwd", str(passwd), "eve", "--delete"], check=True)
    assert [line.split(":")[0] for line in passwd.read_text().splitlines()] == ["dora"]

    with mosquitto(tmp_path, f"allow_anonymous false\npassword_file {passwd}") as port:
        base = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-t", "t", "-m", "m"]
        ok = subprocess.run(base + ["-u", "dora", "-P", "dora's pw"], capture_output=True, text=True, timeout=TIMEOUT)
        assert ok.returncode == 0, ok.stderr
        bad = subprocess.run(base + ["-u", "dora", "-P", "dora"], capture_output=True, text=True, timeout=TIMEOUT)
        assert bad.returncode != 0, bad.stderr
