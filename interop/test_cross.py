"""Across protocols, with third-party clients on both sides: paho-mqtt (MQTT 5) and stomp.py
(STOMP 1.2) through one tolk broker. Payload bytes and content type must survive both ways."""

import queue
import uuid

import paho.mqtt.client as mqtt
import stomp
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from conftest import StompInbox

TIMEOUT = 5
BINARY = bytes(range(256)) + b"\x00end"


def stomp_client(broker):
    inbox = StompInbox()
    conn = stomp.Connection12([(broker.host, broker.port("stomp"))], auto_decode=False, timeout=TIMEOUT)
    conn.set_listener("inbox", inbox)
    conn.connect(wait=True)
    return conn, inbox


def mqtt5_client(broker, inbox=None):
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"cross-{uuid.uuid4().hex[:8]}", protocol=mqtt.MQTTv5)
    if inbox is not None:
        client.on_message = lambda _c, _u, message: inbox.put(message)
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()
    return client


def test_mqtt5_publisher_reaches_stomp_topic_subscriber_with_content_type(broker):
    topic = f"cross/{uuid.uuid4().hex[:8]}"
    conn, inbox = stomp_client(broker)
    conn.subscribe(f"/topic/{topic}/+", id="1", ack="auto", receipt="sub")
    assert inbox.receipts.get(timeout=TIMEOUT) == "sub"
    publisher = mqtt5_client(broker)
    props = Properties(PacketTypes.PUBLISH)
    props.ContentType = "application/octet-stream"
    props.UserProperty = [("sensor", "t1")]
    publisher.publish(f"{topic}/temp", BINARY, qos=1, properties=props).wait_for_publish(TIMEOUT)
    frame = inbox.messages.get(timeout=TIMEOUT)
    assert frame.body == BINARY
    assert frame.headers["destination"] == f"/topic/{topic}/temp"
    assert frame.headers["content-type"] == "application/octet-stream"
    assert frame.headers["sensor"] == "t1"
    publisher.loop_stop()
    conn.disconnect()


def test_stomp_send_reaches_mqtt5_subscriber_with_content_type(broker):
    topic = f"cross/{uuid.uuid4().hex[:8]}"
    received = queue.Queue()
    subscriber = mqtt5_client(broker, received)
    result, _mid = subscriber.subscribe(f"{topic}/#", qos=1)
    assert result == mqtt.MQTT_ERR_SUCCESS
    conn, inbox = stomp_client(broker)
    # The SUBACK is not observable through paho's queue; a retained-free probe message shows the
    # subscription is live before the real one is sent.
    probe = None
    for _ in range(50):
        conn.send(f"/topic/{topic}/probe", b"p", receipt="probe")
        assert inbox.receipts.get(timeout=TIMEOUT) == "probe"
        try:
            probe = received.get(timeout=0.1)
            break
        except queue.Empty:
            continue
    assert probe is not None, "MQTT subscription never became active"
    conn.send(f"/topic/{topic}/data", BINARY, content_type="application/cbor", headers={"persistent": "true", "unit": "C"})
    message = received.get(timeout=TIMEOUT)
    assert message.topic == f"{topic}/data"
    assert message.payload == BINARY
    assert message.qos == 1
    assert message.properties.ContentType == "application/cbor"
    assert ("unit", "C") in message.properties.UserProperty
    subscriber.loop_stop()
    conn.disconnect()
