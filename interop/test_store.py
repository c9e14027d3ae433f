"""The durable store (`[storage]`, on by default): what was acknowledged outlives the broker.

Retained messages: paho publishes them, the broker stops and starts again on the same
data_dir, and a new subscriber gets them back byte for byte; a cleared one stays cleared.

Crash tests: pika (publisher confirms), stomp.py (receipts) and paho (QoS 1) stream persistent
messages into durable queues and a persistent MQTT session, the broker is `kill -9`ed in the
middle of the stream, and after the restart every message that had been acknowledged is read
back. WS-N subscriptions and pull points survive a `kill -9` too."""

import queue
import threading
import uuid

import paho.mqtt.client as mqtt
import pika
import pytest
import stomp

from conftest import Broker, StompInbox

TIMEOUT = 10


def publish(broker, topic, payload):
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="store-pub", protocol=mqtt.MQTTv5)
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1, retain=True).wait_for_publish(TIMEOUT)
    finally:
        client.loop_stop()
        client.disconnect()


def retained(broker, topic_filter, expected):
    """The retained messages a new subscriber to `topic_filter` gets, `expected` of them."""
    got = queue.Queue()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="store-sub", protocol=mqtt.MQTTv5)
    client.on_message = lambda c, u, m: got.put((m.topic, m.payload, m.retain))
    subscribed = queue.Queue()
    client.on_subscribe = lambda c, u, mid, rcs, p: subscribed.put(rcs)
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()
    try:
        client.subscribe(topic_filter, qos=1)
        subscribed.get(timeout=TIMEOUT)
        messages = [got.get(timeout=TIMEOUT) for _ in range(expected)]
        # A live message published now arrives after every retained one: if it comes next,
        # nothing else was retained.
        client.publish(topic_filter.replace("#", "probe"), b"probe", qos=1)
        assert got.get(timeout=TIMEOUT)[1] == b"probe"
        return sorted(messages)
    finally:
        client.loop_stop()
        client.disconnect()


@pytest.fixture
def store_broker(tmp_path):
    b = Broker(tmp_path, disabled=("mqttsn", "wsn"))
    b.start()
    yield b
    b.stop()


def test_retained_messages_survive_a_restart(store_broker):
    binary = bytes(range(256))
    publish(store_broker, "store/a", binary)
    publish(store_broker, "store/b", b"kept")
    publish(store_broker, "store/gone", b"cleared before the restart")
    publish(store_broker, "store/gone", b"")
    store_broker.stop()
    assert store_broker.process.returncode == 0, store_broker.log.read_text()
    store_broker.start()
    assert "store opened" in store_broker.log.read_text()
    assert retained(store_broker, "store/#", 2) == [("store/a", binary, 1), ("store/b", b"kept", 1)]


def test_an_acknowledged_retained_message_survives_kill_9(store_broker):
    """Every retained QoS 1 message acknowledged before a `kill -9` is back after the restart.
    (That the PUBACK waits for the store, which is what makes this hold across a power cut too,
    is shown deterministically by crates/mqtt/tests/durable.rs.)"""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="store-kill", protocol=mqtt.MQTTv311)
    client.connect(store_broker.host, store_broker.port("mqtt"))
    client.loop_start()
    try:
        sent = [client.publish(f"kill/{i:02}", f"value {i}".encode(), qos=1, retain=True) for i in range(50)]
        for info in sent:
            info.wait_for_publish(TIMEOUT)
            assert info.is_published()
        store_broker.process.kill()  # SIGKILL: no shutdown, no last sync
        store_broker.process.wait(TIMEOUT)
    finally:
        client.loop_stop()
    store_broker.start()
    expected = sorted((f"kill/{i:02}", f"value {i}".encode(), 1) for i in range(50))
    assert retained(store_broker, "kill/#", 50) == expected


class AckedStream:
    """A stream of numbered messages with at most `window` unacknowledged at once, which
    `kill -9`s the broker once `kill_after` are acknowledged, mid-stream. `send(i)` sends
    message i; the protocol's acknowledgement calls `acked(i)` (from any thread)."""

    def __init__(self, broker, send, window=50, kill_after=300):
        self.broker, self.send, self.window, self.kill_after = broker, send, window, kill_after
        self.done = set()
        self.sent = 0
        self.changed = threading.Condition()

    def acked(self, i):
        with self.changed:
            self.done.add(i)
            self.changed.notify_all()

    def run(self):
        """Streams until the broker dies; returns the numbers it acknowledged."""

        def sender():
            try:
                while True:
                    with self.changed:
                        self.changed.wait_for(lambda: self.sent - len(self.done) < self.window, TIMEOUT)
                        i = self.sent
                        self.sent += 1
                    self.send(i)
            except Exception:  # the broker was killed under the sender: the stream ends
                pass

        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.done) >= self.kill_after, 60), "acks stopped"
        self.broker.process.kill()  # SIGKILL: no shutdown, no last sync
        self.broker.process.wait(TIMEOUT)
        thread.join(TIMEOUT)
        with self.changed:
            assert self.sent > len(self.done) or self.sent >= self.kill_after
            return set(self.done)


def pika_channel(broker):
    params = pika.ConnectionParameters(broker.host, broker.port("amqp"), heartbeat=0)
    connection = pika.BlockingConnection(params)
    return connection, connection.channel()


def drain_queue(broker, name, expected):
    """The bodies in durable queue `name` after the restart, read until every one of
    `expected` came (more may come: sent, stored, not yet acknowledged when killed)."""
    connection, channel = pika_channel(broker)
    try:
        assert channel.queue_declare(name, durable=True, passive=True).method.message_count >= len(expected)
        got = set()
        while True:
            method, properties, body = channel.basic_get(name, auto_ack=True)
            if method is None:
                break
            got.add(body)
        return got
    finally:
        connection.close()


def test_amqp_confirmed_messages_survive_kill_9(store_broker):
    connection, channel = pika_channel(store_broker)
    channel.queue_declare("crash-amqp", durable=True)
    channel.confirm_delivery()
    persistent = pika.BasicProperties(delivery_mode=2)

    def send(i):
        # Blocking confirms: returns once the broker acked message i.
        channel.basic_publish("", "crash-amqp", f"a{i}".encode(), persistent)
        stream.acked(i)

    stream = AckedStream(store_broker, send, window=1)
    confirmed = stream.run()
    store_broker.start()
    expected = {f"a{i}".encode() for i in confirmed}
    assert expected <= drain_queue(store_broker, "crash-amqp", expected)


def test_stomp_receipted_persistent_messages_survive_kill_9(store_broker):
    inbox = StompInbox()
    conn = stomp.Connection([(store_broker.host, store_broker.port("stomp"))], heartbeats=(0, 0))
    conn.set_listener("", inbox)
    conn.connect(wait=True)

    def send(i):
        conn.send("/queue/crash-stomp", f"s{i}", headers={"persistent": "true"}, receipt=f"r{i}")

    stream = AckedStream(store_broker, send)
    threading.Thread(
        target=lambda: [stream.acked(int(inbox.receipts.get()[1:])) for _ in iter(int, 1)], daemon=True
    ).start()
    receipted = stream.run()
    store_broker.start()

    # STOMP reads the queue back: every receipted message, each once.
    inbox = StompInbox()
    conn = stomp.Connection([(store_broker.host, store_broker.port("stomp"))], heartbeats=(0, 0))
    conn.set_listener("", inbox)
    conn.connect(wait=True)
    conn.subscribe("/queue/crash-stomp", id="1", ack="auto")
    expected = {f"s{i}" for i in receipted}
    got = []
    while not expected <= set(got):
        got.append(inbox.messages.get(timeout=TIMEOUT).body)
    assert len(got) == len(set(got)), "nothing twice"
    conn.disconnect()


def mqtt_stream_until_killed(broker, client_id, topic, prefix):
    """paho publishes `<prefix><i>` at QoS 1 to `topic`, 20 in flight, until the broker is
    killed mid-stream; returns the numbers whose PUBACK came."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311)
    numbers = {}
    client.on_publish = lambda c, u, mid, rc, p: stream.acked(numbers[mid])
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()

    def send(i):
        info = client.publish(topic, f"{prefix}{i}".encode(), qos=1)
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            raise RuntimeError(info.rc)
        numbers[info.mid] = i

    stream = AckedStream(broker, send, window=20)
    try:
        return stream.run()
    finally:
        client.loop_stop()


def test_mqtt_acknowledged_qos1_messages_survive_kill_9_in_a_durable_queue(store_broker):
    """MQTT QoS 1 into a durable AMQP queue bound to the topic: a PUBACK means on disk."""
    connection, channel = pika_channel(store_broker)
    channel.queue_declare("crash-mqtt", durable=True)
    channel.queue_bind("crash-mqtt", "amq.topic", "crash.mqtt")
    connection.close()
    acknowledged = mqtt_stream_until_killed(store_broker, "crash-mqtt", "crash/mqtt", "m")
    store_broker.start()
    expected = {f"m{i}".encode() for i in acknowledged}
    assert expected <= drain_queue(store_broker, "crash-mqtt", expected)


def persistent_subscriber(broker, client_id, topic_filter=None):
    """A paho 3.1.1 client with clean session 0: `(client, session_present, messages)`;
    subscribes to `topic_filter` (QoS 1) when given."""
    got = queue.Queue()
    connected = queue.Queue()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311,
                         clean_session=False)
    client.on_message = lambda c, u, m: got.put(m.payload)
    client.on_connect = lambda c, u, flags, rc, p: connected.put(flags.session_present)
    subscribed = queue.Queue()
    client.on_subscribe = lambda c, u, mid, rcs, p: subscribed.put(rcs)
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()
    present = connected.get(timeout=TIMEOUT)
    if topic_filter:
        client.subscribe(topic_filter, qos=1)
        subscribed.get(timeout=TIMEOUT)
    return client, present, got


def test_a_persistent_mqtt_session_and_its_acknowledged_messages_survive_kill_9(store_broker):
    """A clean-session-0 subscriber goes offline; paho streams QoS 1 messages to it and the
    broker is killed mid-stream. After the restart the subscriber resumes its session (session
    present, no new SUBSCRIBE) and receives every message whose PUBACK the publisher had."""
    client, present, _ = persistent_subscriber(store_broker, "kept-sub", "persist/#")
    assert not present
    client.disconnect()
    client.loop_stop()

    acknowledged = mqtt_stream_until_killed(store_broker, "kept-pub", "persist/x", "p")
    store_broker.start()
    assert "persistent MQTT sessions restored" in store_broker.log.read_text()

    client, present, got = persistent_subscriber(store_broker, "kept-sub")
    try:
        assert present, "the session is back"
        expected = {f"p{i}".encode() for i in acknowledged}
        received = set()
        while not expected <= received:
            received.add(got.get(timeout=TIMEOUT))
        # The subscription came back too: a message published now arrives.
        probe = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="kept-probe", protocol=mqtt.MQTTv311)
        probe.connect(store_broker.host, store_broker.port("mqtt"))
        probe.loop_start()
        probe.publish("persist/after", b"after", qos=1).wait_for_publish(TIMEOUT)
        probe.loop_stop()
        while got.get(timeout=TIMEOUT) != b"after":
            pass
    finally:
        client.disconnect()
        client.loop_stop()


WSN_BODY = '<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>{}</soap:Body></soap:Envelope>'


@pytest.fixture
def wsn_broker(tmp_path):
    b = Broker(tmp_path, disabled=("mqttsn",))
    b.start()
    yield b
    b.stop()


def test_wsn_subscriptions_and_pull_points_survive_kill_9(wsn_broker):
    """A push subscription (CXF-shaped) and a pull point with a subscription of its own are
    made, the broker is killed with SIGKILL and started again: a Notify then reaches the HTTP
    consumer and the pull point under their old addresses, and the old subscription address
    still answers Unsubscribe."""
    from test_wsn import CXF_NOTIFY, CXF_SUBSCRIBE, Consumer, endpoint, post11, soap_text

    consumer = Consumer()
    try:
        broker = wsn_broker
        topic = f"kept{uuid.uuid4().hex[:8]}"
        r = post11(endpoint(broker), CXF_SUBSCRIBE.format(
            mid=uuid.uuid4(), to=endpoint(broker), consumer=consumer.url("kept"), topic=topic, policy=""))
        assert r.status_code == 200, r.text
        subscription = soap_text(soap_text(r.text, "SubscriptionReference"), "Address")
        r = post11(endpoint(broker), WSN_BODY.format('<CreatePullPoint xmlns="http://docs.oasis-open.org/wsn/b-2"/>'))
        assert r.status_code == 200, r.text
        pull_point = soap_text(soap_text(r.text, "PullPoint"), "Address")
        r = post11(endpoint(broker), CXF_SUBSCRIBE.format(
            mid=uuid.uuid4(), to=endpoint(broker), consumer=pull_point, topic=topic, policy=""))
        assert r.status_code == 200, r.text

        broker.process.kill()
        broker.process.wait(TIMEOUT)
        broker.start()
        assert "WS-N subscriptions and pull points restored" in broker.log.read_text()

        r = post11(endpoint(broker), CXF_NOTIFY.format(
            mid=uuid.uuid4(), to=endpoint(broker), topic=topic, message="<reading>after</reading>"))
        assert r.status_code == 202, r.text
        path, _, body = consumer.next()
        assert path == "/kept" and b">after</reading>" in body
        get = '<GetMessages xmlns="http://docs.oasis-open.org/wsn/b-2"><MaximumNumber>10</MaximumNumber></GetMessages>'
        r = post11(pull_point, WSN_BODY.format(get))
        assert r.status_code == 200 and ">after</reading>" in r.text, r.text
        r = post11(subscription, WSN_BODY.format('<Unsubscribe xmlns="http://docs.oasis-open.org/wsn/b-2"/>'))
        assert r.status_code == 200, r.text
    finally:
        consumer.close()


def test_amqp_durable_exchanges_and_their_bindings_survive_kill_9(store_broker):
    """A durable direct exchange bound to a durable queue, and a non-durable exchange: after
    `kill -9` and a restart, the durable one still routes (a mandatory publish is not
    returned) and the other is gone (passive declare: 404)."""
    connection, channel = pika_channel(store_broker)
    channel.exchange_declare("kept-orders", "direct", durable=True)
    channel.exchange_declare("scratch-orders", "fanout", durable=False)
    channel.queue_declare("kept-eu", durable=True)
    channel.queue_bind("kept-eu", "kept-orders", "eu")
    channel.confirm_delivery()
    persistent = pika.BasicProperties(delivery_mode=2)
    channel.basic_publish("kept-orders", "eu", b"before", persistent, mandatory=True)
    connection.close()
    store_broker.process.kill()
    store_broker.process.wait(TIMEOUT)
    store_broker.start()

    connection, channel = pika_channel(store_broker)
    try:
        channel.confirm_delivery()
        channel.basic_publish("kept-orders", "eu", b"after", persistent, mandatory=True)
        bodies = [channel.basic_get("kept-eu", auto_ack=True)[2] for _ in range(2)]
        assert bodies == [b"before", b"after"]
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as gone:
            channel.exchange_declare("scratch-orders", "fanout", passive=True)
        assert gone.value.reply_code == 404
    finally:
        if connection.is_open:
            connection.close()


def test_the_will_of_a_persistent_mqtt_session_outlives_kill_9(store_broker):
    """A persistent session with a will is connected when the broker is killed: its connection
    ended without DISCONNECT, so after the restart its will is published (it was kept with the
    session), and a subscriber receives it."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="kept-will", protocol=mqtt.MQTTv311,
                         clean_session=False)
    client.will_set("wills/kept", b"gone", qos=1, retain=True)
    connected = queue.Queue()
    client.on_connect = lambda c, u, flags, rc, p: connected.put(rc)
    client.connect(store_broker.host, store_broker.port("mqtt"))
    client.loop_start()
    try:
        connected.get(timeout=TIMEOUT)
        store_broker.process.kill()
        store_broker.process.wait(TIMEOUT)
    finally:
        client.loop_stop()
    store_broker.start()

    got = queue.Queue()
    subscribed = queue.Queue()
    watcher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="will-watcher", protocol=mqtt.MQTTv311)
    watcher.on_message = lambda c, u, m: got.put((m.topic, m.payload))
    watcher.on_subscribe = lambda c, u, mid, rcs, p: subscribed.put(rcs)
    watcher.connect(store_broker.host, store_broker.port("mqtt"))
    watcher.loop_start()
    try:
        watcher.subscribe("wills/#", qos=1)
        subscribed.get(timeout=TIMEOUT)
        # Retained, so it arrives whether it was published before or after the SUBSCRIBE.
        assert got.get(timeout=TIMEOUT) == ("wills/kept", b"gone")
    finally:
        watcher.loop_stop()
        watcher.disconnect()
