"""The durable store (`[storage]`, on by default): retained messages outlive the broker. paho
publishes retained messages, the broker stops and starts again on the same data_dir, and a new
subscriber gets them back byte for byte; a cleared one stays cleared."""

import queue

import paho.mqtt.client as mqtt
import pytest

from conftest import Broker

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
