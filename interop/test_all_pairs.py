"""Every protocol to every protocol with third-party clients: paho-mqtt (MQTT 5), mqtt-sn-12 (its
Python API), stomp.py (STOMP 1.2), pika (AMQP 0-9-1), requests plus a Python http.server
consumer (WS-Notification) and slixmpp (XMPP publish-subscribe), through one tolk broker: 6 × 6
pairs.

For each (publisher, subscriber) pair the subscriber subscribes with a wildcard, then the
publisher sends a binary, a text and an XML payload and a final marker. Everything before the
marker must have arrived exactly once, on the topic the subscriber's protocol names it by, byte
for byte, with the content type and the user header where both protocols carry them and without
them where one cannot (docs/translation.md). The Rust twin, broker/tests/all_pairs.rs, also covers
subscribers that reconnect.

mqtt-sn-12 subscribes at QoS 0: its client never acknowledges QoS 1 deliveries (see
test_mqttsn.py). Every subscription here is confirmed by the broker before anything is published
(SUBACK, RECEIPT, queue.bind-ok, SubscribeResponse), so no probe messages are needed.
"""

import asyncio
import base64
import http.server
import queue
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

import paho.mqtt.client as mqtt
import pika
import pytest
import requests
import stomp
import slixmpp
from lxml import etree
from mqttsn12.client.MqttSnClient import MqttSnClient, MqttSnListener
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

TIMEOUT = 5
PROTOCOLS = ["mqtt", "mqttsn", "stomp", "amqp", "wsn", "xmpp"]
CARRIES_CONTENT_TYPE = {"mqtt", "stomp", "amqp", "wsn", "xmpp"}
# XMPP subscribers get user headers as SHIM headers; an XMPP publish has no place for them.
SENDS_USER_HEADERS = {"mqtt", "stomp", "amqp"}
GETS_USER_HEADERS = {"mqtt", "stomp", "amqp", "xmpp"}
# Protocols that carry XML as a parsed element: XML arrives equal, not byte for byte.
XML_AS_ELEMENT = {"xmpp"}
HEADER = "Site-Id"
MARKER = b"end"
WSNT = "http://docs.oasis-open.org/wsn/b-2"
TOLK = "urn:tolk:wsn:1"
TOPIC_NS = "urn:tolk:all-pairs"
CONCRETE = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete"
FULL = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full"
STOMP_STANDARD = {
    "destination", "message-id", "subscription", "content-type", "content-length", "ack",
    "persistent", "redelivered", "expires", "reply-to", "correlation-id",
}


@dataclass
class Received:
    topic: str
    payload: bytes
    content_type: str | None = None
    headers: list = field(default_factory=list)


# ------------------------------------------------------------------ topic mapping, per protocol


def amqp_key(filter_):
    """Topic levels → routing-key words; '.' and '/' swap inside a word; '+' → '*'."""
    words = []
    for level in filter_.split("/"):
        words.append("*" if level == "+" else level.translate(str.maketrans("./", "/.")))
    return ".".join(words)


def xml_level(level):
    """A topic level as an XML name: other characters as _xHHHH_ (ASCII is all we use)."""
    out = []
    for i, c in enumerate(level):
        ok = c.isascii() and (c.isalpha() or c == "_" or (i > 0 and (c.isdigit() or c in "-.")))
        out.append(c if ok else f"_x{ord(c):04X}_")
    return "".join(out)


def wsn_path(topic):
    return "/".join(xml_level(level) for level in topic.split("/"))


def wsn_filter(filter_):
    if "+" not in filter_ and "#" not in filter_:
        return CONCRETE, "tns:" + wsn_path(filter_)
    text = "tns:"
    levels = filter_.split("/")
    for i, level in enumerate(levels):
        if level == "#":
            text += "//."
        else:
            text += ("/" if i else "") + ("*" if level == "+" else xml_level(level))
    return FULL, text


OWN_TERMS = {
    "mqtt": lambda t: t,
    "mqttsn": lambda t: t,
    "stomp": lambda t: f"/topic/{t}",
    "amqp": amqp_key,
    "wsn": lambda t: "{%s}%s" % (TOPIC_NS, wsn_path(t)),
    "xmpp": lambda t: t,
}


# ------------------------------------------------------------------ clients


class Mqtt:
    def __init__(self, broker, name):
        self.inbox, self.subscribed, self.connected = queue.Queue(), threading.Event(), threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name, protocol=mqtt.MQTTv5)
        self.client.on_connect = lambda *_: self.connected.set()
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        self.client.on_message = lambda _c, _u, m: self.inbox.put(m)
        self.client.connect(broker.host, broker.port("mqtt"))
        self.client.loop_start()
        assert self.connected.wait(TIMEOUT), "paho: no CONNACK"

    def subscribe(self, filter_):
        self.client.subscribe(filter_, qos=1)
        assert self.subscribed.wait(TIMEOUT), "paho: no SUBACK"

    def publish(self, topic, payload, content_type, header):
        props = Properties(PacketTypes.PUBLISH)
        if content_type:
            props.ContentType = content_type
        if header:
            props.UserProperty = [header]
        self.client.publish(topic, payload, qos=1, properties=props).wait_for_publish(TIMEOUT)

    def next(self):
        try:
            m = self.inbox.get(timeout=TIMEOUT)
        except queue.Empty:
            return None
        props = getattr(m, "properties", None)
        return Received(
            m.topic,
            m.payload,
            getattr(props, "ContentType", None),
            [tuple(p) for p in getattr(props, "UserProperty", [])],
        )

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


class MqttSn:
    """mqtt-sn-12's API. Deliveries are read by polling its socket, which is how the package's
    own mqtt_sn_sub works."""

    def __init__(self, broker, name):
        self.client = MqttSnClient()
        self.client.set_client_id(name[:23])
        self.client.set_keep_alive(60)
        self.client.set_timeout(TIMEOUT)
        self.client.open(broker.host, broker.port("mqttsn"))
        self.client.send_connect()
        self.inbox = []

    def subscribe(self, filter_):
        inbox = self.inbox

        class Listener(MqttSnListener):
            def message_arrived(self, msg):
                inbox.append(Received(msg.get_topic_name(), bytes(msg.get_payload())))

        self.client.send_subscribe(filter_, 0, Listener())

    def publish(self, topic, payload, content_type, header):
        self.client.send_publish(topic, payload, 1)

    def next(self):
        deadline = time.monotonic() + TIMEOUT
        while not self.inbox and time.monotonic() < deadline:
            self.client.polling()
            if not self.inbox:
                time.sleep(0.005)
        return self.inbox.pop(0) if self.inbox else None

    def close(self):
        self.client.send_disconnect()
        self.client.close()


class Stomp(stomp.ConnectionListener):
    def __init__(self, broker, name):
        self.inbox, self.receipts = queue.Queue(), queue.Queue()
        self.conn = stomp.Connection12([(broker.host, broker.port("stomp"))], auto_decode=False, timeout=TIMEOUT)
        self.conn.set_listener("inbox", self)
        self.conn.connect(wait=True)

    def on_message(self, frame):
        self.inbox.put(frame)

    def on_receipt(self, frame):
        self.receipts.put(frame.headers["receipt-id"])

    def subscribe(self, filter_):
        self.conn.subscribe(f"/topic/{filter_}", id="1", ack="client-individual", receipt="sub")
        assert self.receipts.get(timeout=TIMEOUT) == "sub"

    def publish(self, topic, payload, content_type, header):
        receipt = uuid.uuid4().hex
        headers = {"persistent": "true"}
        if header:
            headers[header[0]] = header[1]
        self.conn.send(f"/topic/{topic}", payload, content_type=content_type, headers=headers, receipt=receipt)
        assert self.receipts.get(timeout=TIMEOUT) == receipt

    def next(self):
        try:
            frame = self.inbox.get(timeout=TIMEOUT)
        except queue.Empty:
            return None
        self.conn.ack(frame.headers["ack"])
        return Received(
            frame.headers["destination"],
            frame.body,
            frame.headers.get("content-type"),
            [(k, v) for k, v in frame.headers.items() if k not in STOMP_STANDARD],
        )

    def close(self):
        self.conn.disconnect()


class Amqp:
    def __init__(self, broker, name):
        params = pika.ConnectionParameters(
            host=broker.host,
            port=broker.port("amqp"),
            credentials=pika.PlainCredentials("guest", "guest"),
            socket_timeout=TIMEOUT,
            stack_timeout=TIMEOUT,
        )
        self.connection = pika.BlockingConnection(params)
        self.channel = self.connection.channel()
        self.channel.confirm_delivery()
        self.queue = None

    def subscribe(self, filter_):
        self.queue = self.channel.queue_declare("", exclusive=True).method.queue
        self.channel.queue_bind(self.queue, "amq.topic", routing_key=amqp_key(filter_))

    def publish(self, topic, payload, content_type, header):
        props = pika.BasicProperties(content_type=content_type, delivery_mode=2, headers=dict([header]) if header else None)
        self.channel.basic_publish("amq.topic", amqp_key(topic), payload, props, mandatory=True)

    def next(self):
        for method, props, body in self.channel.consume(self.queue, inactivity_timeout=TIMEOUT):
            if method is None:
                return None
            self.channel.basic_ack(method.delivery_tag)
            assert method.exchange == "amq.topic", method
            text = lambda v: v.decode() if isinstance(v, bytes) else str(v)
            return Received(method.routing_key, body, props.content_type, [(k, text(v)) for k, v in (props.headers or {}).items()])

    def close(self):
        self.connection.close()


class Wsn:
    """Notify and Subscribe as raw SOAP 1.1 with requests; the consumer is an http.server."""

    def __init__(self, broker, name):
        self.url = f"http://{broker.host}:{broker.port('http')}/wsn"
        self.inbox = queue.Queue()
        self.server = None

    def _consumer(self):
        inbox = self.inbox

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                inbox.put(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/consumer"

    @staticmethod
    def envelope(body):
        return (
            '<?xml version="1.0" encoding="utf-8"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" '
            f'xmlns:wsa="http://www.w3.org/2005/08/addressing" xmlns:wsnt="{WSNT}"><s:Header/><s:Body>{body}</s:Body></s:Envelope>'
        ).encode()

    def post(self, body):
        return requests.post(self.url, data=self.envelope(body), headers={"Content-Type": "text/xml; charset=utf-8"}, timeout=TIMEOUT)

    def subscribe(self, filter_):
        dialect, expression = wsn_filter(filter_)
        reply = self.post(
            f"<wsnt:Subscribe><wsnt:ConsumerReference><wsa:Address>{self._consumer()}</wsa:Address></wsnt:ConsumerReference>"
            f'<wsnt:Filter><wsnt:TopicExpression Dialect="{dialect}" xmlns:tns="{TOPIC_NS}">{expression}</wsnt:TopicExpression>'
            "</wsnt:Filter></wsnt:Subscribe>"
        )
        assert reply.status_code == 200, reply.text

    def publish(self, topic, payload, content_type, header):
        generic_xml = content_type is None or content_type.split(";")[0].strip().lower() in ("application/xml", "text/xml")
        if generic_xml and payload.startswith(b"<"):
            element = payload.decode()
        else:
            ct = f' contentType="{escape(content_type, {chr(34): "&quot;"})}"' if content_type else ""
            try:
                text = payload.decode()
                assert not any(ord(c) < 32 and c not in "\t\n\r" for c in text)
                element = f'<tolk:Payload xmlns:tolk="{TOLK}" encoding="text"{ct}>{escape(text, {chr(13): "&#13;"})}</tolk:Payload>'
            except (UnicodeDecodeError, AssertionError):
                element = f'<tolk:Payload xmlns:tolk="{TOLK}" encoding="base64"{ct}>{base64.b64encode(payload).decode()}</tolk:Payload>'
        reply = self.post(
            f'<wsnt:Notify><wsnt:NotificationMessage><wsnt:Topic Dialect="{CONCRETE}" xmlns:tns="{TOPIC_NS}">'
            f"tns:{wsn_path(topic)}</wsnt:Topic><wsnt:Message>{element}</wsnt:Message></wsnt:NotificationMessage></wsnt:Notify>"
        )
        assert reply.status_code == 202, reply.text

    def next(self):
        try:
            body = self.inbox.get(timeout=TIMEOUT)
        except queue.Empty:
            return None
        doc = etree.fromstring(body)
        messages = doc.findall(f".//{{{WSNT}}}NotificationMessage")
        assert len(messages) == 1, body
        topic = messages[0].find(f"{{{WSNT}}}Topic")
        prefix, _, path = topic.text.strip().rpartition(":")
        namespace = topic.nsmap.get(prefix or None)
        # The payload element's own bytes, as the broker wrote them (lxml would re-serialise).
        raw = re.search(rb"<(?:[\w.-]+:)?Message>\s*(.*?)\s*</(?:[\w.-]+:)?Message>", body, re.S).group(1)
        element = messages[0].find(f"{{{WSNT}}}Message")[0]
        if element.tag == f"{{{TOLK}}}Payload":
            text = element.text or ""
            payload = base64.b64decode(text) if element.get("encoding") == "base64" else text.encode()
            return Received("{%s}%s" % (namespace, path), payload, element.get("contentType"))
        return Received("{%s}%s" % (namespace, path), raw, "application/xml")

    def close(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()


class Xmpp:
    """slixmpp (asyncio) on an event loop of its own thread, behind the same blocking calls as the
    other clients. Items are read from the event's XML: the tolk payload wrapper is undone as
    a WS-N consumer does, any other element is the payload as XML; SHIM headers carry the content
    type and user headers."""

    SHIM = "http://jabber.org/protocol/shim"
    EVENT = "http://jabber.org/protocol/pubsub#event"

    def __init__(self, broker, name):
        self.inbox = queue.Queue()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.client = self.call(self._connect(broker, name))

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(TIMEOUT * 2)

    def request(self, make):
        """Runs `make()` (a slixmpp request, which returns a future) on the client's loop."""

        async def run():
            return await make()

        return self.call(run())

    async def _connect(self, broker, name):
        client = slixmpp.ClientXMPP(f"{name}@localhost/{name}", "secret")
        client.register_plugin("xep_0060")
        client.ca_certs = str(broker.ca_file)
        client.enable_direct_tls = False
        ready = asyncio.Event()
        client.add_event_handler("session_start", lambda _: ready.set())
        client.add_event_handler("pubsub_publish", self._on_event)
        client.connect(host=broker.host, port=broker.port("xmpp"))
        await asyncio.wait_for(ready.wait(), TIMEOUT)
        return client

    def _on_event(self, message):
        items = message.xml.find(f"{{{self.EVENT}}}event/{{{self.EVENT}}}items")
        item = items.find(f"{{{self.EVENT}}}item")
        headers = [(h.get("name"), h.text or "") for h in message.xml.findall(f"{{{self.SHIM}}}headers/{{{self.SHIM}}}header")]
        content_type = next((v for n, v in headers if n == "Content-Type"), None)
        headers = [(n, v) for n, v in headers if n != "Content-Type"]
        element = item[0] if len(item) else None
        if element is None:
            payload = b""
        elif element.tag == f"{{{TOLK}}}Payload":
            text = element.text or ""
            payload = base64.b64decode(text) if element.get("encoding") == "base64" else text.encode()
            content_type = element.get("contentType", content_type)
        else:
            from xml.etree import ElementTree

            payload = ElementTree.tostring(element)
            content_type = content_type or "application/xml"
        self.inbox.put(Received(items.get("node"), payload, content_type, headers))

    def subscribe(self, filter_):
        self.request(lambda: self.client.plugin["xep_0060"].subscribe("pubsub.localhost", filter_, timeout=TIMEOUT))

    def publish(self, topic, payload, content_type, header):
        from xml.etree import ElementTree

        generic_xml = content_type is None or content_type.split(";")[0].strip().lower() in ("application/xml", "text/xml")
        if generic_xml and payload.startswith(b"<"):
            element = ElementTree.fromstring(payload)
        else:
            element = ElementTree.Element(f"{{{TOLK}}}Payload")
            if content_type:
                element.set("contentType", content_type)
            try:
                text = payload.decode()
                # slixmpp writes a CR as it is, and XML reads CR LF as LF: base64 keeps it.
                assert not any(ord(c) < 32 and c not in "\t\n" for c in text)
                element.set("encoding", "text")
                element.text = text
            except (UnicodeDecodeError, AssertionError):
                element.set("encoding", "base64")
                element.text = base64.b64encode(payload).decode()
        pubsub = self.client.plugin["xep_0060"]
        self.request(lambda: pubsub.publish("pubsub.localhost", topic, payload=element, timeout=TIMEOUT))

    def next(self):
        try:
            return self.inbox.get(timeout=TIMEOUT)
        except queue.Empty:
            return None

    def close(self):
        async def bye():
            await self.client.disconnect()

        self.call(bye())
        # slixmpp cancels its tasks when the client is dropped: on its loop, still running.
        self.loop.call_soon_threadsafe(self.__dict__.pop, "client")
        self.loop.call_soon_threadsafe(self.loop.stop)


def same_xml(a, b):
    """Whether two XML payloads are the same document: names, attributes and text equal, prefixes
    and quoting aside."""

    def tree(payload):
        return [(e.tag, sorted(e.attrib.items()), e.text, e.tail) for e in etree.fromstring(payload).iter()]

    try:
        return tree(a) == tree(b)
    except etree.XMLSyntaxError:
        return False


CLIENTS = {"mqtt": Mqtt, "mqttsn": MqttSn, "stomp": Stomp, "amqp": Amqp, "wsn": Wsn, "xmpp": Xmpp}


# ------------------------------------------------------------------ the matrix


KINDS = {
    # A '.' inside a level (swapped in AMQP keys); a leading digit and a space (escaped in WS-N).
    "bin.v1": "application/octet-stream",
    "2nd text": 'text/plain; charset="utf-8"',
    "xml": "application/xml",
    # Well-formed markup with a content type that is not XML: WS-N must wrap it to keep that.
    "html": "text/html; charset=utf-8",
    "empty": "text/plain",
    # Bigger than an AMQP frame and than any MQTT-SN datagram: MQTT-SN cannot carry it (dropped
    # and counted by the broker, never truncated).
    "big": "application/octet-stream",
}
BIG = 150_000


def carried(kind, pub, sub):
    # MQTT-SN datagrams cannot hold it, nor can an XMPP stanza a client sends (64 KiB).
    return kind != "big" or ("mqttsn" not in (pub, sub) and pub != "xmpp")


def payload(kind, pair):
    if kind == "bin.v1":
        return b"\x00\x01\xff\xfe\x80tolk\x00<&>\r\n\xc3\x28" + pair.encode() + b"\x00"
    if kind == "2nd text":
        return f"21.5 \u00b0C <ok> & \"q\" 'a'\r\n{pair}".encode()
    if kind == "xml":
        return f'<m:reading xmlns:m="urn:tolk:test" unit="C">21.5 &amp; {pair}</m:reading>'.encode()
    if kind == "html":
        return f"<p>21.5 &amp; <b>{pair}</b></p>".encode()
    if kind == "empty":
        return b""
    return bytes(i % 251 for i in range(BIG))


DELIVERED = set()


@pytest.mark.parametrize("pub", PROTOCOLS)
@pytest.mark.parametrize("sub", PROTOCOLS)
def test_pair(broker, pub, sub):
    pair = f"{pub}-{sub}"
    base = f"interop-pairs/{pair}"
    filter_ = f"{base}/+" if (PROTOCOLS.index(pub) + PROTOCOLS.index(sub)) % 2 == 0 else f"{base}/#"
    header = (HEADER, f"{pair}: caf\u00e9 \\ line\nend") if pub in SENDS_USER_HEADERS else None
    subscriber = CLIENTS[sub](broker, f"ip-{pair}-s")
    publisher = None
    try:
        subscriber.subscribe(filter_)
        publisher = CLIENTS[pub](broker, f"ip-{pair}-p")
        for kind, content_type in KINDS.items():
            if kind != "big" or pub not in ("mqttsn", "xmpp"):
                publisher.publish(f"{base}/{kind}", payload(kind, pair), content_type, header)
        publisher.publish(f"{base}/end", MARKER, None, None)

        got = []
        while True:
            received = subscriber.next()
            assert received is not None, f"[{pair}] the marker never arrived; before it: {got}"
            if received.payload == MARKER:
                break
            got.append(received)

        problems = []
        for kind, content_type in KINDS.items():
            topic = OWN_TERMS[sub](f"{base}/{kind}")
            copies = [r for r in got if r.topic == topic]
            if not carried(kind, pub, sub):
                if copies:
                    problems.append(f"{kind}: {sub} cannot carry it, yet it arrived {len(copies)} times")
                continue
            if len(copies) != 1:
                problems.append(f"{kind}: arrived {len(copies)} times on {topic!r} (got topics {[r.topic for r in got]})")
                continue
            r = copies[0]
            as_element = sub in XML_AS_ELEMENT or pub in XML_AS_ELEMENT
            if as_element and payload(kind, pair).startswith(b"<") and same_xml(r.payload, payload(kind, pair)):
                pass
            elif r.payload != payload(kind, pair):
                problems.append(f"{kind}: payload {r.payload[:200]!r} ({len(r.payload)} bytes), expected {payload(kind, pair)[:200]!r}")
            if sub not in CARRIES_CONTENT_TYPE:
                want_ct = None
            elif sub in ("wsn", "xmpp") and (kind == "xml" or (kind == "html" and pub not in CARRIES_CONTENT_TYPE)):
                want_ct = "application/xml"
            else:
                want_ct = content_type if pub in CARRIES_CONTENT_TYPE else None
            if sub != "mqttsn" and r.content_type != want_ct:
                problems.append(f"{kind}: content type {r.content_type!r}, expected {want_ct!r}")
            want_headers = [header] if header and sub in GETS_USER_HEADERS else []
            if sub != "mqttsn" and r.headers != want_headers:
                problems.append(f"{kind}: user headers {r.headers!r}, expected {want_headers!r}")
        assert not problems, f"[{pub} -> {sub}]\n" + "\n".join(problems)
        DELIVERED.add((pub, sub))
    finally:
        subscriber.close()
        if publisher is not None:
            publisher.close()


def test_latency_has_a_row_for_every_pair_delivered(broker):
    if not DELIVERED:
        pytest.skip("no pair ran")
    base = f"http://{broker.host}:{broker.port('http')}"
    rows = requests.get(f"{base}/api/latency", timeout=TIMEOUT).json()["rows"]
    seen = {(r["in"], r["out"]) for r in rows if r["hop"] == "end_to_end" and r["count"] > 0}
    metrics = requests.get(f"{base}/metrics", timeout=TIMEOUT).text
    missing = []
    for pub, sub in sorted(DELIVERED):
        if (pub, sub) not in seen:
            missing.append(f"/api/latency: no end_to_end row in={pub} out={sub}")
        series = f'tolk_hop_latency_seconds_count{{hop="end_to_end",in="{pub}",out="{sub}"}} '
        if not any(line.startswith(series) and int(line.split()[-1]) > 0 for line in metrics.splitlines()):
            missing.append(f"/metrics: no {series.strip()}")
    assert not missing, "\n".join(missing) + f"\nend_to_end rows: {sorted(seen)}"
