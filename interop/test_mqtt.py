"""MQTT 3.1.1 and 5.0 against clients nobody on this project wrote: mosquitto_pub/mosquitto_sub
(Debian mosquitto-clients) and paho-mqtt 2.x. Every test uses its own client ids and topics, so
the suite can share one broker; every wait has a timeout.
"""

import queue
import socket
import subprocess
import threading
import time
import uuid

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

WAIT = 5.0
VERSIONS = {"3.1.1": (mqtt.MQTTv311, "mqttv311"), "5": (mqtt.MQTTv5, "mqttv5")}


def uid():
    return uuid.uuid4().hex[:10]


class Paho:
    """A paho client running its network loop in a thread; messages land in a queue."""

    def __init__(self, broker, client_id, version="3.1.1", clean=True, will=None, session_expiry=None):
        protocol, _ = VERSIONS[version]
        self.v5 = protocol == mqtt.MQTTv5
        kwargs = {} if self.v5 else {"clean_session": clean}
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=protocol, **kwargs)
        self.client.reconnect_delay_set(60, 60)  # never reconnect behind a test's back
        self.messages = queue.Queue()
        self.acks = queue.Queue()
        self.connected = queue.Queue()
        self.client.on_connect = lambda c, u, flags, rc, props: self.connected.put((flags.session_present, rc))
        self.client.on_message = lambda c, u, msg: self.messages.put(msg)
        self.client.on_subscribe = lambda c, u, mid, rcs, props: self.acks.put(rcs)
        if will:
            self.client.will_set(*will)
        props = None
        if self.v5 and session_expiry is not None:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = session_expiry
        connect_kwargs = {"clean_start": clean, "properties": props} if self.v5 else {}
        self.client.connect(broker.host, broker.port("mqtt"), keepalive=30, **connect_kwargs)
        self.client.loop_start()
        self.session_present, rc = self.connected.get(timeout=WAIT)
        assert rc == 0, f"CONNACK {rc}"

    def subscribe(self, topic, qos):
        self.client.subscribe(topic, qos)
        codes = self.acks.get(timeout=WAIT)
        assert [int(c.value) if hasattr(c, "value") else int(c) for c in codes] == [qos]

    def publish(self, topic, payload, qos=0, retain=False):
        self.client.publish(topic, payload, qos=qos, retain=retain).wait_for_publish(timeout=WAIT)

    def next(self):
        return self.messages.get(timeout=WAIT)

    def nothing_queued(self):
        return self.messages.empty()

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()

    def kill(self):
        """Drops the TCP connection without DISCONNECT, as a crashed device would."""
        sock = self.client.socket()
        self.client.loop_stop()
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def mosquitto_pub(broker, version, topic, payload=None, qos=0, retain=False):
    args = ["mosquitto_pub", "-h", broker.host, "-p", str(broker.port("mqtt")), "-V", VERSIONS[version][1]]
    args += ["-i", f"mp-{uid()}", "-t", topic, "-q", str(qos)]
    args += ["-r"] if retain else []
    args += ["-n"] if payload is None else ["-m", payload]
    subprocess.run(args, check=True, timeout=WAIT, capture_output=True)


class MosquittoSub:
    """mosquitto_sub in debug mode: we wait for its SUBACK before publishing, and read each
    payload as hex (`-F %x`) to compare it byte for byte."""

    def __init__(self, broker, version, topic, qos, count):
        # stdbuf: mosquitto_sub's stdout is block-buffered when piped, and we must see SUBACK now.
        args = ["stdbuf", "-oL", "mosquitto_sub", "-h", broker.host, "-p", str(broker.port("mqtt")), "-V", VERSIONS[version][1]]
        args += ["-i", f"ms-{uid()}", "-t", topic, "-q", str(qos), "-C", str(count), "-W", "5", "-d"]
        args += ["-F", "PAYLOAD %x %q"]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + WAIT
        while "SUBACK" not in self.lines.get(timeout=max(0.01, deadline - time.monotonic())):
            pass

    def _pump(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def payloads(self):
        """(hex payload, qos) of every message, once mosquitto_sub exits after `count`."""
        self.process.wait(timeout=WAIT + 1)
        got = []
        while True:
            line = self.lines.get(timeout=WAIT)
            if line is None:
                return got
            if line.startswith("PAYLOAD "):
                _, hexed, qos = line.split(" ")
                got.append((hexed, int(qos)))


@pytest.mark.timeout(15)
@pytest.mark.parametrize("version", ["3.1.1", "5"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_mosquitto_pub_to_paho(broker, version, qos):
    topic = f"interop/{uid()}/pub"
    sub = Paho(broker, f"sub-{uid()}", version)
    sub.subscribe(topic, qos)
    mosquitto_pub(broker, version, topic, f"héllo q{qos}", qos=qos)
    msg = sub.next()
    assert (msg.topic, msg.payload, msg.qos, msg.retain) == (topic, f"héllo q{qos}".encode(), qos, False)
    sub.close()


@pytest.mark.timeout(15)
@pytest.mark.parametrize("version", ["3.1.1", "5"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_paho_to_mosquitto_sub_binary_payload(broker, version, qos):
    topic = f"interop/{uid()}/sub"
    sub = MosquittoSub(broker, version, topic, qos, count=1)
    publisher = Paho(broker, f"pub-{uid()}", version)
    payload = bytes(range(256))
    publisher.publish(topic, payload, qos=qos)
    assert sub.payloads() == [(payload.hex(), qos)]
    publisher.close()


@pytest.mark.timeout(15)
@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_retained_set_replace_clear(broker, version):
    topic = f"interop/{uid()}/retained"
    mosquitto_pub(broker, version, topic, "first", qos=1, retain=True)
    mosquitto_pub(broker, version, topic, "second", qos=1, retain=True)
    late = Paho(broker, f"late-{uid()}", version)
    late.subscribe(topic, 1)
    msg = late.next()
    assert (msg.payload, msg.retain) == (b"second", True)
    late.close()
    mosquitto_pub(broker, version, topic, None, qos=1, retain=True)  # -n: empty payload clears
    later = Paho(broker, f"later-{uid()}", version)
    later.subscribe(topic, 1)
    later.publish(topic, "marker", qos=1)
    msg = later.next()
    assert (msg.payload, msg.retain) == (b"marker", False), "nothing retained any more"
    later.close()


@pytest.mark.timeout(15)
@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_will_on_abrupt_disconnect(broker, version):
    will_topic = f"interop/{uid()}/will"
    watcher = Paho(broker, f"watch-{uid()}", version)
    watcher.subscribe(will_topic, 1)
    doomed = Paho(broker, f"doomed-{uid()}", version, will=(will_topic, b"device lost", 1, False))
    polite = Paho(broker, f"polite-{uid()}", version, will=(will_topic, b"must not appear", 1, False))
    polite.close()
    doomed.kill()
    msg = watcher.next()
    assert (msg.topic, msg.payload) == (will_topic, b"device lost")
    watcher.close()


@pytest.mark.timeout(15)
@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_persistent_session_gets_what_was_published_while_away(broker, version):
    topic = f"interop/{uid()}/offline"
    client_id = f"durable-{uid()}"
    first = Paho(broker, client_id, version, clean=False, session_expiry=60)
    first.subscribe(topic, 1)
    first.close()
    mosquitto_pub(broker, version, topic, "while you were away", qos=1)
    back = Paho(broker, client_id, version, clean=False, session_expiry=60)
    assert back.session_present
    msg = back.next()
    assert (msg.payload, msg.qos) == (b"while you were away", 1)
    back.close()


@pytest.mark.timeout(15)
@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_shared_subscription_balances_across_members(broker, version):
    group, topic = f"g{uid()}", f"interop/{uid()}/jobs"
    members = [Paho(broker, f"member{n}-{uid()}", version) for n in range(2)]
    for m in members:
        m.subscribe(f"$share/{group}/{topic}", 1)
    publisher = Paho(broker, f"pub-{uid()}", version)
    for n in range(10):
        publisher.publish(topic, f"job {n}", qos=1)
    got = [[], []]
    deadline = time.monotonic() + WAIT
    while len(got[0]) + len(got[1]) < 10 and time.monotonic() < deadline:
        for i, m in enumerate(members):
            while not m.nothing_queued():
                got[i].append(m.next().payload.decode())
        time.sleep(0.01)
    assert sorted(got[0] + got[1], key=lambda s: int(s.split()[1])) == [f"job {n}" for n in range(10)]
    assert got[0] and got[1], f"both members work: {got}"
    for c in members + [publisher]:
        c.close()
