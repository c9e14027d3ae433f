"""Payload re-encoding (`[[transcode]]`, docs/encodings.md) seen by third-party clients, each
check decoded by a library that is not tolk's: Python's ElementTree reads the W3C XPath map a
WS-N consumer receives, stomp.py receives JSON made from a Notify, `cbor2` decodes what an
MQTT-SN client (the mqtt-sn-12 package) receives, and Google's `protobuf` package both encodes
the published Protobuf and says what its canonical JSON is."""

import json
import queue
import re
import uuid
import xml.etree.ElementTree as ET

import cbor2
import paho.mqtt.client as mqtt
import pytest
import requests
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from conftest import ROOT, Broker
from test_cross import mqtt5_client, stomp_client
from test_mqttsn import api_client
from test_wsn import CXF_NOTIFY, CXF_SUBSCRIBE, Consumer, endpoint, post11

from mqttsn12.MqttSnConstants import MqttSnConstants
from mqttsn12.client.MqttSnClient import MqttSnListener
from mqttsn12.packets import PublishPacket

TIMEOUT = 10
FN = "http://www.w3.org/2005/xpath-functions"
PROTO = ROOT / "codecs" / "payload" / "tests" / "data" / "reading.proto"
READING = {"sensor": "greenhouse-1", "temp": 21.5, "count": 3, "ok": True, "tags": ["a", "b"], "note": None}

RULES = f"""
[[transcode]]
topics = "enc/cbor/#"
to = "application/cbor"
protocols = ["mqttsn", "mqtt"]

[[transcode]]
topics = "enc/json/#"
to = "application/json"
protocols = ["stomp"]

[[transcode]]
topics = "enc/pb/#"
to = "application/json"
proto = {{ file = "{PROTO}", message = "tolk.test.Reading" }}

[[content_type]]
topics = "enc/pb/#"
type = "application/x-protobuf"
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("tolk-encodings"), extra=RULES)
    b.start()
    yield b
    b.stop()
    assert b.process.returncode == 0, b.log.read_text()


@pytest.fixture
def consumer():
    c = Consumer()
    yield c
    c.close()


def json_props():
    props = Properties(PacketTypes.PUBLISH)
    props.ContentType = "application/json"
    return props


def from_w3c(element):
    """XPath 3.1 xml-to-json, written here from the W3C text, not from tolk's code."""
    tag = element.tag.removeprefix(f"{{{FN}}}")
    if tag == "map":
        return {child.get("key"): from_w3c(child) for child in element}
    if tag == "array":
        return [from_w3c(child) for child in element]
    if tag == "string":
        return element.text or ""
    if tag == "number":
        number = float(element.text)
        return int(number) if number.is_integer() and "." not in element.text else number
    if tag == "boolean":
        return element.text == "true"
    if tag == "null":
        return None
    raise AssertionError(f"not an XPath json-to-xml element: {element.tag}")


def mqtt5_subscriber(broker, topic):
    """A paho MQTT 5 client subscribed to `topic` (its SUBACK in), and the queue it fills."""
    received, acked = queue.Queue(), queue.Queue()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"enc-{uuid.uuid4().hex[:8]}", protocol=mqtt.MQTTv5)
    client.on_message = lambda _c, _u, message: received.put(message)
    client.on_subscribe = lambda _c, _u, _mid, codes, _p: acked.put(codes)
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()
    client.subscribe(topic, qos=1)
    assert [code.value for code in acked.get(timeout=TIMEOUT)] == [1]
    return client, received


def counter(broker, to, result):
    text = requests.get(f"http://{broker.host}:{broker.port('http')}/metrics", timeout=TIMEOUT).text
    m = re.search(rf'^tolk_transcode_total{{to="{to}",result="{result}"}} (\d+)$', text, re.M)
    assert m, text
    return int(m.group(1))


def test_json_from_mqtt5_reaches_a_wsn_consumer_as_a_w3c_map(broker, consumer):
    topic = f"encwsn{uuid.uuid4().hex[:8]}"  # Simple topics have one level
    r = post11(
        endpoint(broker),
        CXF_SUBSCRIBE.format(mid=uuid.uuid4(), to=endpoint(broker), consumer=consumer.url("w3c"), topic=topic, policy=""),
    )
    assert r.status_code == 200, r.text
    publisher = mqtt5_client(broker)
    try:
        publisher.publish(topic, json.dumps(READING), qos=1, properties=json_props()).wait_for_publish(TIMEOUT)
        _, _, body = consumer.next()
    finally:
        publisher.loop_stop()
        publisher.disconnect()
    message = ET.fromstring(body).find(".//{http://docs.oasis-open.org/wsn/b-2}Message")
    (payload,) = list(message)
    assert payload.tag == f"{{{FN}}}map"
    assert from_w3c(payload) == READING


def test_xml_notify_reaches_a_stomp_subscriber_as_json(broker):
    topic = f"enc/json/j{uuid.uuid4().hex[:8]}"  # each step an NCName
    conn, inbox = stomp_client(broker)
    try:
        conn.subscribe(f"/topic/{topic}", id="1", ack="auto", receipt="sub")
        assert inbox.receipts.get(timeout=TIMEOUT) == "sub"
        reading = '<reading xmlns="urn:greenhouse" unit="C"><sensor>g1</sensor><t>21.5</t><t>21.7</t></reading>'
        # A Concrete topic path, since a Simple one has a single level.
        notify = CXF_NOTIFY.format(mid=uuid.uuid4(), to=endpoint(broker), topic=f"tns:{topic}", message=reading)
        notify = notify.replace("TopicExpression/Simple\">", 'TopicExpression/Concrete" xmlns:tns="urn:tolk:test">')
        r = post11(endpoint(broker), notify)
        assert r.status_code == 202, r.text
        frame = inbox.messages.get(timeout=TIMEOUT)
    finally:
        conn.disconnect()
    assert frame.headers["content-type"] == "application/json"
    assert json.loads(frame.body) == {"reading": {"@unit": "C", "sensor": "g1", "t": ["21.5", "21.7"]}}


def test_an_mqttsn_subscriber_receives_cbor(broker):
    topic = f"enc/cbor/{uuid.uuid4().hex[:8]}"
    client = api_client(broker, f"enc-{uuid.uuid4().hex[:6]}")
    publisher = mqtt5_client(broker)
    try:
        client.send_connect()
        client.send_subscribe(topic, 0, MqttSnListener())
        publisher.publish(topic, json.dumps(READING), qos=1, properties=json_props()).wait_for_publish(TIMEOUT)
        data = client.receive_packet(True)
        kind = data[3] if data[0] == 1 else data[1]
        assert kind == MqttSnConstants.TYPE_PUBLISH, f"unexpected message type {kind:#x}"
        publish = PublishPacket()
        publish.decode(data)
        assert cbor2.loads(publish.get_data()) == READING
        client.send_disconnect()
    finally:
        client.close()
        publisher.loop_stop()
        publisher.disconnect()


def reading_class():
    """tolk.test.Reading, built with Google's protobuf package from a descriptor written here."""
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="reading.proto", package="tolk.test", syntax="proto3")
    message = file.message_type.add(name="Reading")
    for name, number, kind, label in [
        ("sensor", 1, field.TYPE_STRING, field.LABEL_OPTIONAL),
        ("value", 2, field.TYPE_DOUBLE, field.LABEL_OPTIONAL),
        ("time", 3, field.TYPE_INT64, field.LABEL_OPTIONAL),
        ("tags", 4, field.TYPE_STRING, field.LABEL_REPEATED),
    ]:
        message.field.add(name=name, number=number, type=kind, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tolk.test.Reading"))


def test_protobuf_from_an_mqtt311_publisher_arrives_as_json(broker):
    topic = f"enc/pb/{uuid.uuid4().hex[:8]}"
    reading = reading_class()(sensor="g1", value=21.5, time=1764201600000, tags=["roof", "east"])
    subscriber, received = mqtt5_subscriber(broker, topic)
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"enc-pb-{uuid.uuid4().hex[:6]}")
    publisher.connect(broker.host, broker.port("mqtt"))
    publisher.loop_start()
    try:
        publisher.publish(topic, reading.SerializeToString(), qos=1).wait_for_publish(TIMEOUT)
        message = received.get(timeout=TIMEOUT)
    finally:
        for client in (publisher, subscriber):
            client.loop_stop()
            client.disconnect()
    assert message.properties.ContentType == "application/json"
    assert json.loads(message.payload) == json_format.MessageToDict(reading)


def test_a_malformed_payload_passes_through_unchanged_and_is_counted(broker):
    topic = f"enc/cbor/{uuid.uuid4().hex[:8]}"
    before = counter(broker, "cbor", "failed")
    subscriber, received = mqtt5_subscriber(broker, topic)
    try:
        bad = b'{"temp": 21.5, "unit": '
        subscriber.publish(topic, bad, qos=1, properties=json_props()).wait_for_publish(TIMEOUT)
        message = received.get(timeout=TIMEOUT)
    finally:
        subscriber.loop_stop()
        subscriber.disconnect()
    assert message.payload == bad
    assert message.properties.ContentType == "application/json"
    assert counter(broker, "cbor", "failed") == before + 1
