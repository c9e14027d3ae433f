"""MQTT-SN 1.2 gateway against a third-party client: the `mqtt-sn-12` package (its
`mqtt_sn_pub` / `mqtt_sn_sub` commands, and its Python API where the commands cannot go).

What the commands cannot do, and is driven through the package's API instead:
- waking a sleeping client: the commands have no PINGREQ-with-client-id; `PingReqPacket` is used
  (its `set_client_id` stores bytes that its own `encode` cannot handle, so the attribute is set).
- acknowledging deliveries: the client compares the QoS *level* of a received PUBLISH with the
  QoS *flag bits* (1 == 0x20), so it never sends PUBACK, and it has no PUBREC at all. Subscribers
  here therefore subscribe at QoS 0, except the sleeping client, which acknowledges by hand. QoS
  1 and 2 are tested in the publishing direction (client → gateway), where the client is right.
"""

import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mqttsn12.client.MqttSnClient import MqttSnClient, MqttSnListener
from mqttsn12.MqttSnConstants import MqttSnConstants
from mqttsn12.packets import PingReqPacket, PublishPacket, PubAckPacket

TIMEOUT = 10


def command(name):
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} (pip package mqtt-sn-12) is not installed")
    return found


def run_pub(broker, *args):
    """Runs mqtt_sn_pub to completion (it waits for every acknowledgement)."""
    result = subprocess.run(
        [command("mqtt_sn_pub"), "-h", broker.host, "-p", str(broker.port("mqttsn")), "--timeout", "5", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, f"mqtt_sn_pub {args} failed:\n{result.stdout}\n{result.stderr}"


class Sub:
    """mqtt_sn_sub in the background: its printed payloads, and its debug log to know when the
    SUBACK has arrived (so that publishing cannot race the subscription)."""

    def __init__(self, broker, *args):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [command("mqtt_sn_sub"), "-d", "-h", broker.host, "-p", str(broker.port("mqttsn")), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines = queue.Queue()
        self.log = []
        self.subscribed = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.log.append(line)
            if "SUBACK return code: 0" in line:
                self.subscribed.set()

    def wait_subscribed(self):
        assert self.subscribed.wait(TIMEOUT), "no SUBACK:\n" + "".join(self.log)
        return self

    def next(self):
        try:
            return self.lines.get(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError("nothing received:\n" + "".join(self.log[-30:]))

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=TIMEOUT)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def subscriber(broker):
    subs = []

    def start(*args):
        sub = Sub(broker, *args)
        subs.append(sub)
        return sub.wait_subscribed()

    yield start
    for sub in subs:
        sub.close()


def api_client(broker, client_id, keep_alive=60):
    client = MqttSnClient()
    client.set_client_id(client_id)
    client.set_keep_alive(keep_alive)
    client.set_timeout(5)
    client.open(broker.host, broker.port("mqttsn"))
    return client


def test_searchgw_is_answered(broker):
    client = api_client(broker, "interop-search")
    try:
        client.send_search_gateway(1)  # raises unless a GWINFO arrives
    finally:
        client.close()


def test_publish_at_qos_0_1_2_reaches_a_subscriber(broker, subscriber):
    sub = subscriber("-q", "0", "-t", "interop/qos")
    for qos in ("0", "1", "2"):
        run_pub(broker, "-q", qos, "-t", "interop/qos", "-m", f"payload at qos {qos}")
        assert sub.next() == f"payload at qos {qos}"


def test_wildcard_subscription_is_registered_before_publishing(broker, subscriber):
    sub = subscriber("-q", "0", "-t", "interop/wild/#")
    run_pub(broker, "-q", "1", "-t", "interop/wild/a/b", "-m", "via REGISTER")
    assert sub.next() == "via REGISTER"
    assert any("Received REGISTER packet" in line for line in sub.log), "gateway did not REGISTER the topic"


def test_short_topic_and_qos_minus_one_without_connection(broker, subscriber):
    sub = subscriber("-q", "0", "-t", "sh")  # two characters: a short topic name
    run_pub(broker, "-q", "-1", "-t", "sh", "-m", "no connection needed")
    assert sub.next() == "no connection needed"
    run_pub(broker, "-q", "1", "-t", "sh", "-m", "short at qos 1")
    assert sub.next() == "short at qos 1"


def test_payload_of_2_kib_uses_the_three_octet_length(broker, subscriber):
    sub = subscriber("-q", "0", "-t", "interop/big")
    payload = "0123456789abcdef" * 128
    # The client switches to the three-octet Length form by itself above 248 octets...
    run_pub(broker, "-q", "1", "-t", "interop/big", "-m", payload)
    # ...and the subscriber decodes the gateway's three-octet form.
    assert sub.next() == payload
    # The same datagram built by hand through the API, to check the form on the wire.
    client = api_client(broker, "interop-big")
    try:
        client.send_connect()
        packet = PublishPacket()
        packet.set_flags(MqttSnConstants.FLAG_QOS_1)
        packet.set_topic_id(client.send_register("interop/big"))
        packet.set_message_id(77)
        packet.set_data(payload.upper().encode())
        datagram = packet.encode()
        assert datagram[0] == 0x01 and struct.unpack(">H", datagram[1:3])[0] == len(datagram)
        client.send_packet(datagram)
        puback = PubAckPacket()
        puback.decode(client.wait_for(True, MqttSnConstants.TYPE_PUBACK))
        assert (puback.get_message_id(), puback.get_return_code()) == (77, 0)
        client.send_disconnect()
    finally:
        client.close()
    assert sub.next() == payload.upper()


def test_will_is_published_when_a_client_dies(broker, subscriber):
    watcher = subscriber("-q", "0", "-t", "interop/will/+")
    # Keep-alive 3 s: the client pings on whole-second clock ticks, so a shorter one could be
    # missed by up to a second while it is still alive.
    dying = Sub(
        broker,
        "-k", "3",
        "-t", "interop/unused",
        "--will-topic", "interop/will/dying",
        "--will-payload", "died",
        "--will-qos", "1",
    )
    try:
        dying.wait_subscribed()
        dying.kill()  # no DISCONNECT: after 1.5 x keep-alive (4.5 s) the gateway publishes the will
        assert watcher.next() == "died"
    finally:
        dying.close()


def test_a_sleeping_client_collects_its_messages_on_wake_up(broker):
    sleeper = api_client(broker, "interop-sleeper")
    try:
        sleeper.send_connect()
        sleeper.send_subscribe("interop/sleep", 1, MqttSnListener())
        sleeper.send_disconnect(60)  # asleep, session kept
        run_pub(broker, "-q", "1", "-t", "interop/sleep", "-m", "while you slept")
        received = []
        # Wake up (PINGREQ with the client id): buffered messages, then PINGRESP (§6.14).
        # A client wakes periodically; retry a few times in case the message was still in flight.
        for _ in range(5):
            ping = PingReqPacket()
            ping.client_id = "interop-sleeper"
            sleeper.send_packet(ping.encode())
            while True:
                data = sleeper.receive_packet(True)
                kind = data[3] if data[0] == 1 else data[1]
                if kind == MqttSnConstants.TYPE_PINGRESP:
                    break
                assert kind == MqttSnConstants.TYPE_PUBLISH, f"unexpected message type {kind:#x}"
                publish = PublishPacket()
                publish.decode(data)
                received.append(publish.get_data())
                sleeper.send_puback(publish, MqttSnConstants.ACCEPTED)
            if received:
                break
            time.sleep(0.2)
        assert received == [b"while you slept"]
        sleeper.send_disconnect()
    finally:
        sleeper.close()


@pytest.fixture(scope="module")
def predefined_broker(tmp_path_factory):
    """A broker of its own with pre-defined topic ids, global and for one client id."""
    from conftest import Broker

    b = Broker(tmp_path_factory.mktemp("tolk-mqttsn-predefined"))
    text = b.config.read_text()
    global_ids = '1001 = "interop/predefined"\n'
    header = "\n[mqttsn.predefined]\n"  # a table header, not the commented example
    if header in text:
        text = text.replace(header, header + global_ids, 1)
    else:
        text += "\n[mqttsn.predefined]\n" + global_ids
    text += '\n[mqttsn.clients.interop-special.predefined]\n1002 = "interop/special"\n'
    b.config.write_text(text)
    b.start()
    yield b
    b.stop()


def test_predefined_topic_ids_global_and_per_client(predefined_broker):
    broker = predefined_broker
    sub = Sub(broker, "-q", "0", "-T", "1001").wait_subscribed()
    special = Sub(broker, "-q", "0", "-t", "interop/special").wait_subscribed()
    try:
        run_pub(broker, "-q", "-1", "-T", "1001", "-m", "predefined without connection")
        assert sub.next() == "predefined without connection"
        run_pub(broker, "-q", "1", "-T", "1001", "-m", "predefined at qos 1")
        assert sub.next() == "predefined at qos 1"
        run_pub(broker, "-q", "1", "-i", "interop-special", "-T", "1002", "-m", "only mine")
        assert special.next() == "only mine"
    finally:
        sub.close()
        special.close()


def test_mqttsn_reaches_an_mqtt_subscriber(broker):
    try:
        mqtt_port = broker.port("mqtt")
    except KeyError:
        pytest.skip("no MQTT listener in this broker")
    import paho.mqtt.client as mqtt

    got = queue.Queue()
    subscribed = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="interop-mqtt-side")
    client.on_connect = lambda c, u, f, rc, p: c.subscribe("interop/cross/#", qos=1)
    client.on_subscribe = lambda c, u, mid, rcs, p: subscribed.set()
    client.on_message = lambda c, u, m: got.put((m.topic, m.payload))
    client.connect(broker.host, mqtt_port)
    client.loop_start()
    try:
        assert subscribed.wait(TIMEOUT)
        run_pub(broker, "-q", "1", "-t", "interop/cross/sn", "-m", "from mqtt-sn")
        assert got.get(timeout=TIMEOUT) == ("interop/cross/sn", b"from mqtt-sn")
    finally:
        client.loop_stop()
        client.disconnect()
