"""XMPP interoperability: slixmpp (Python) and xmpp.js (@xmpp/client, Node) against tolk's XMPP
front end, with Debian's Prosody 0.12 as the reference server.

Every check that is plain RFC 6120 / XEP-0030 / XEP-0060 / XEP-0199 runs against both servers
(the `server` fixture, params "prosody" and "tolk") and must pass against Prosody: that proves the
test itself is right, so a failure against tolk is tolk's. Proven for both servers:

- a client connects, is offered STARTTLS and uses it (certificate for `localhost` checked against
  the test CA), logs in with SASL PLAIN, binds a resource, gets answers to the legacy session iq
  and to a XEP-0199 ping; a wrong password gets SASL <failure><not-authorized/>;
- disco#info of the pubsub service names identity pubsub/service and the features tolk promises;
  disco#items of the domain lists the pubsub service;
- XEP-0060: an item published by one client reaches a subscribed client as an event naming the
  node and the item id (given or generated), with the payload element unchanged; retrieve-items
  returns the published item, purge (pubsub#owner) empties the node, delete drops the item;
  after unsubscribing from A and not from B, a publish to A then one to B yields B's event only;
- an iq in an unknown namespace gets <error type='cancel'><service-unavailable/>;
- xmpp.js does its own subscribe/publish round trip (its own STARTTLS, SASL and XML stack);
- raw sockets: malformed XML gets the stream error not-well-formed, a stanza over 64 KiB
  policy-violation (Prosody is configured with tolk's 64 KiB limit).

tolk only (Prosody has no MQTT side nor topic filters): an MQTT-style wildcard node receives
MQTT publishes, text / binary / XML payloads mapped to items (the tolk:Payload wrapper WS-N uses) with SHIM headers; XMPP items reach
an MQTT subscriber as text bytes or as an XML document; SASL ANONYMOUS; comments, DOCTYPEs (a
billion-laughs prolog) and entity references get restricted-xml (Prosody answers those with
not-well-formed, see the test).

Every test uses its own node names, so tests do not see each other's events.
"""

import asyncio
import base64
import json
import os
import queue
import shutil
import subprocess
import threading
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from slixmpp.exceptions import IqError

from conftest import Broker
from test_auth import PASSWD
from xmpp_support import (
    NS_DISCO_INFO,
    NS_DISCO_ITEMS,
    NS_PING,
    NS_PUBSUB,
    NS_PUBSUB_EVENT,
    NS_SASL,
    NS_SESSION,
    NS_SHIM,
    NS_STANZAS,
    NS_STREAMS,
    NS_TLS,
    NS_TOLK_PAYLOAD,
    TIMEOUT,
    Client,
    XmppServer,
    find_one,
    prosody,
    run,
    show,
    stream_error,
    xml_equal,
)

NODE_DIR = Path(__file__).resolve().parent / "node"
NS_ATOM = "http://www.w3.org/2005/Atom"
ATOM_ENTRY = f"""<entry xmlns='{NS_ATOM}'>
  <title>Greenhouse temperature</title>
  <id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id>
  <updated>2024-05-01T12:00:00Z</updated>
  <summary type='text'>21.5 °C &amp; rising</summary>
  <link rel='alternate' href='https://example.org/greenhouse/1'/>
</entry>"""
READING = "<reading xmlns='urn:example:sensor' unit='C'><t at='12:00'>21.5</t><t at='12:05'>21.7</t></reading>"

# What tolk promises in disco#info of its pubsub service, all of which Prosody 0.12 advertises
# too (with autocreate_on_publish); Prosody lists more (create-nodes, publish-options, ...).
PUBSUB_FEATURES = {
    "http://jabber.org/protocol/pubsub",
    "http://jabber.org/protocol/pubsub#publish",
    "http://jabber.org/protocol/pubsub#subscribe",
    "http://jabber.org/protocol/pubsub#retrieve-items",
    "http://jabber.org/protocol/pubsub#purge-nodes",
    "http://jabber.org/protocol/pubsub#delete-nodes",
    "http://jabber.org/protocol/pubsub#auto-create",
}


def unique(kind):
    return f"interop/xmpp/{uuid.uuid4().hex[:10]}/{kind}"


def atom():
    return ET.fromstring(ATOM_ENTRY)


# ---------------------------------------------------------------------------------------------
# Servers


@pytest.fixture(scope="module")
def prosody_server(tmp_path_factory):
    with prosody(tmp_path_factory.mktemp("prosody")) as server:
        yield server


def tolk_xmpp(broker):
    return XmppServer("tolk", broker.host, broker.port("xmpp"), "localhost", "pubsub.localhost", broker.ca_file, broker=broker)


@pytest.fixture(params=["prosody", "tolk"])
def server(request):
    if request.param == "prosody":
        return request.getfixturevalue("prosody_server")
    return tolk_xmpp(request.getfixturevalue("broker"))


@pytest.fixture
def tolk(broker):
    """tolk's XMPP listener, for the checks Prosody cannot be the reference of."""
    return tolk_xmpp(broker)


@pytest.fixture(scope="module")
def tolk_auth(tmp_path_factory):
    """A tolk with users (test_auth.py's password file: alice / "wonder land")."""
    b = Broker(
        tmp_path_factory.mktemp("tolk-xmpp-auth"),
        disabled=("mqttsn", "wsn"),
        extra=f'[auth]\npassword_file = "{PASSWD}"\n',
    )
    b.start()
    yield XmppServer(
        "tolk", b.host, b.port("xmpp"), "localhost", "pubsub.localhost", b.ca_file, users={"alice": "wonder land"}, broker=b
    )
    b.stop()
    assert b.process.returncode == 0, b.log.read_text()


@pytest.fixture(params=["prosody", "tolk"])
def auth_server(request):
    return request.getfixturevalue("prosody_server" if request.param == "prosody" else "tolk_auth")


# ---------------------------------------------------------------------------------------------
# Stream, TLS, SASL, binding, ping, disco


def test_starttls_plain_bind_session_and_ping(server):
    async def main():
        async with Client(server, "alice", "ping") as alice:
            first = alice.features[0]
            assert first.find(f"{{{NS_TLS}}}starttls") is not None, show(first)
            tls = alice.tls
            assert tls is not None, "the stream is not TLS"
            # getpeercert() is empty unless the chain was verified against the test CA.
            assert ("DNS", "localhost") in tls.getpeercert()["subjectAltName"]
            mechanisms = [m.text for m in alice.features[1].iter(f"{{{NS_SASL}}}mechanism")]
            assert "PLAIN" in mechanisms, mechanisms
            assert alice.mechanism == "PLAIN"
            bound = alice.xmpp.boundjid
            assert bound.bare == f"alice@{server.domain}"
            assert bound.resource, "no resource bound"

            session = await alice.iq("set", server.domain, ET.Element(f"{{{NS_SESSION}}}session"))
            assert session.get("type") == "result", show(session)

            pong = await alice.iq("get", server.domain, ET.Element(f"{{{NS_PING}}}ping"))
            assert pong.get("type") == "result", show(pong)
            assert pong.get("from") == server.domain
            assert pong.get("to") == bound.full
            assert list(pong) == [], show(pong)

    run(main())


def test_wrong_password_is_not_authorized(auth_server):
    user, right = next(iter(auth_server.users.items()))

    async def main():
        good = Client(auth_server, user, "right", password=right)
        assert await good.login() is None
        await good.close()
        bad = Client(auth_server, user, "wrong", password=right + "x")
        failure = await bad.login()
        await bad.close()
        assert failure is not None, "a wrong password was accepted"
        assert failure.tag == f"{{{NS_SASL}}}failure", show(failure)
        conditions = [child.tag for child in failure if child.tag != f"{{{NS_SASL}}}text"]
        assert conditions == [f"{{{NS_SASL}}}not-authorized"], show(failure)

    run(main())


def test_disco_info_of_the_pubsub_service_and_items_of_the_domain(server):
    async def main():
        async with Client(server, "alice", "disco") as alice:
            info = await alice.iq("get", server.pubsub, ET.Element(f"{{{NS_DISCO_INFO}}}query"))
            assert info.get("from") == server.pubsub
            query = find_one(info, f"{{{NS_DISCO_INFO}}}query")
            identities = [(i.get("category"), i.get("type")) for i in query.findall(f"{{{NS_DISCO_INFO}}}identity")]
            assert ("pubsub", "service") in identities, show(info)
            features = {f.get("var") for f in query.findall(f"{{{NS_DISCO_INFO}}}feature")}
            assert PUBSUB_FEATURES <= features, f"missing {sorted(PUBSUB_FEATURES - features)}"

            items = await alice.iq("get", server.domain, ET.Element(f"{{{NS_DISCO_ITEMS}}}query"))
            query = find_one(items, f"{{{NS_DISCO_ITEMS}}}query")
            assert server.pubsub in [i.get("jid") for i in query.findall(f"{{{NS_DISCO_ITEMS}}}item")], show(items)

    run(main())


@pytest.mark.parametrize("to", ["domain", "pubsub"])
def test_unknown_iq_is_service_unavailable(server, to):
    """RFC 6120 8.4: an iq get/set nobody handles gets service-unavailable (type cancel). Both
    servers answer that, for the domain and for the pubsub service alike."""
    jid = server.domain if to == "domain" else server.pubsub

    async def main():
        async with Client(server, "alice", "unknown") as alice:
            reply = await alice.iq_error("get", jid, ET.Element("{urn:tolk:interop:no-such-thing}query"))
            assert reply.get("from") == jid
            error = find_one(reply, "{jabber:client}error")
            assert error.get("type") == "cancel", show(reply)
            assert [c.tag for c in error if c.tag != f"{{{NS_STANZAS}}}text"] == [
                f"{{{NS_STANZAS}}}service-unavailable"
            ], show(reply)

    run(main())


# ---------------------------------------------------------------------------------------------
# XEP-0060


def event_item(message, node, server):
    """The single <item/> of an items event for `node`, checking the message's envelope."""
    assert message.get("from") == server.pubsub, show(message)
    event = find_one(message, f"{{{NS_PUBSUB_EVENT}}}event")
    items = find_one(event, f"{{{NS_PUBSUB_EVENT}}}items")
    assert items.get("node") == node, show(message)
    return find_one(items, f"{{{NS_PUBSUB_EVENT}}}item")


def subscribed(reply, node, jid):
    sub = find_one(reply, f"{{{NS_PUBSUB}}}pubsub/{{{NS_PUBSUB}}}subscription")
    assert (sub.get("node"), sub.get("jid"), sub.get("subscription")) == (node, jid, "subscribed"), show(reply)


def published_id(reply, node):
    publish = find_one(reply, f"{{{NS_PUBSUB}}}pubsub/{{{NS_PUBSUB}}}publish")
    assert publish.get("node") == node, show(reply)
    return find_one(publish, f"{{{NS_PUBSUB}}}item").get("id")


def test_publish_reaches_subscriber_with_node_id_and_payload(server):
    node = unique("atom")

    async def main():
        async with Client(server, "bob", "sub") as bob, Client(server, "alice", "pub") as alice:
            subscribed(await bob.subscribe(node), node, bob.jid)

            assert published_id(await alice.publish(node, atom(), id="entry-1"), node) == "entry-1"
            message = await bob.event()
            assert message.get("to") == bob.jid
            item = event_item(message, node, server)
            assert item.get("id") == "entry-1"
            [payload] = list(item)
            assert payload.tag == f"{{{NS_ATOM}}}entry"
            assert xml_equal(payload, atom()), show(payload)
            assert payload.find(f"{{{NS_ATOM}}}summary").text == "21.5 °C & rising"

            # Without an id the service makes one, names it in the result and in the event.
            generated = published_id(await alice.publish(node, atom()), node)
            assert generated, "no generated item id"
            item = event_item(await bob.event(), node, server)
            assert item.get("id") == generated
            assert xml_equal(list(item)[0], atom())

    run(main())


def test_retrieve_items_then_purge(server):
    node = unique("items")
    reading = ET.fromstring(READING)

    async def main():
        async with Client(server, "alice", "items") as alice:
            assert published_id(await alice.publish(node, reading, id="r1"), node) == "r1"
            reply = await alice.items(node)
            items = find_one(reply, f"{{{NS_PUBSUB}}}pubsub/{{{NS_PUBSUB}}}items")
            assert items.get("node") == node
            [item] = items.findall(f"{{{NS_PUBSUB}}}item")
            assert item.get("id") == "r1"
            [payload] = list(item)
            assert xml_equal(payload, ET.fromstring(READING)), show(payload)

            purged = await alice.purge(node)
            assert purged.get("type") == "result", show(purged)
            reply = await alice.items(node)
            items = find_one(reply, f"{{{NS_PUBSUB}}}pubsub/{{{NS_PUBSUB}}}items")
            assert items.get("node") == node
            assert items.findall(f"{{{NS_PUBSUB}}}item") == [], show(reply)

    run(main())


def test_delete_node_drops_its_item(server):
    """XEP-0060 8.4 (pubsub#owner delete). Afterwards Prosody has no such node (retrieve-items:
    <error type='cancel'><item-not-found/>), tolk's topic still exists without an item (an empty
    <items/>): either way the published item is gone."""
    node = unique("delete")

    async def main():
        async with Client(server, "alice", "delete") as alice:
            published_id(await alice.publish(node, ET.fromstring(READING), id="d1"), node)
            deleted = await alice.delete(node)
            assert deleted.get("type") == "result", show(deleted)
            try:
                reply = await alice.items(node)
            except IqError as e:
                error = find_one(e.iq.xml, "{jabber:client}error")
                assert error.get("type") == "cancel", show(e.iq.xml)
                assert error.find(f"{{{NS_STANZAS}}}item-not-found") is not None, show(e.iq.xml)
            else:
                items = find_one(reply, f"{{{NS_PUBSUB}}}pubsub/{{{NS_PUBSUB}}}items")
                assert items.findall(f"{{{NS_PUBSUB}}}item") == [], show(reply)

    run(main())


def test_unsubscribed_node_sends_no_more_events(server):
    a, b = unique("a"), unique("b")

    async def main():
        async with Client(server, "bob", "unsub") as bob, Client(server, "alice", "pub") as alice:
            subscribed(await bob.subscribe(a), a, bob.jid)
            subscribed(await bob.subscribe(b), b, bob.jid)
            reply = await bob.unsubscribe(a)
            assert reply.get("type") == "result", show(reply)
            # XEP-0060 6.2.2: an empty result, or one with subscription='none' (Prosody's).
            sub = reply.find(f"{{{NS_PUBSUB}}}pubsub/{{{NS_PUBSUB}}}subscription")
            if sub is not None:
                assert (sub.get("node"), sub.get("subscription")) == (a, "none"), show(reply)

            published_id(await alice.publish(a, ET.fromstring("<n xmlns='urn:example:n'>to A</n>"), id="to-a"), a)
            published_id(await alice.publish(b, ET.fromstring("<n xmlns='urn:example:n'>to B</n>"), id="to-b"), b)
            # One publisher, one subscriber: A's event, had there been one, would come first.
            item = event_item(await bob.event(), b, server)
            assert item.get("id") == "to-b"
            assert bob.events.empty(), f"unexpected event: {show(bob.events.get_nowait())}"

    run(main())


def test_xmppjs_round_trip(server):
    node_binary = shutil.which("node")
    assert node_binary, "node is not installed"
    assert (NODE_DIR / "node_modules" / "@xmpp" / "client").is_dir(), "run `npm ci` in interop/node first"
    node = unique("xmppjs")
    result = subprocess.run(
        [
            node_binary, str(NODE_DIR / "xmpp_roundtrip.mjs"),
            f"xmpp://{server.host}:{server.port}", server.domain, "bob", server.users["bob"], node, ATOM_ENTRY,
        ],
        capture_output=True, text=True, timeout=60, cwd=NODE_DIR,
        env={**os.environ, "NODE_EXTRA_CA_CERTS": str(server.ca_file)},
    )
    assert result.returncode == 0, f"stdout: {result.stdout}\nstderr: {result.stderr}"
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["secure"] is True
    assert out["mechanism"] == "PLAIN"
    assert out["jid"].startswith(f"bob@{server.domain}/")
    # tolk adds a subid (XEP-0060 6.1.6 allows it), Prosody does not.
    assert {k: out["subscription"].get(k) for k in ("node", "jid", "subscription")} == {
        "node": node,
        "jid": out["jid"],
        "subscription": "subscribed",
    }
    assert out["published_id"] == out["sent_id"]
    assert out["event_from"] == server.pubsub
    item = ET.fromstring(out["item"])
    assert item.get("id") == out["sent_id"]
    [payload] = list(item)
    assert xml_equal(payload, atom()), out["item"]


# ---------------------------------------------------------------------------------------------
# Stream errors on a raw socket


def stream_condition(conditions):
    """The defined condition of a <stream:error> (its <text/> and application conditions such as
    Prosody's <stanza-too-big xmlns='urn:xmpp:errors'/> aside)."""
    defined = [c for c in conditions if c.startswith(f"{{{NS_STREAMS}}}") and c != f"{{{NS_STREAMS}}}text"]
    assert len(defined) == 1, conditions
    return defined[0].split("}")[1]


def test_malformed_xml_is_not_well_formed(server):
    conditions, closed = stream_error(server, b"<iq type='get' id='bad'><ping xmlns='urn:xmpp:ping'></iq>")
    assert stream_condition(conditions) == "not-well-formed"
    assert closed, "no </stream:stream> after the stream error"


def test_stanza_over_64_kib_is_a_policy_violation(server):
    """The stanza is never finished: a server must stop buffering at its limit, not wait for the
    end tag (Prosody counts a stanza's bytes only while it is incomplete, so a complete one that
    arrives within one read would pass its check)."""
    start = b"<message to='bob@localhost' id='big'><body>"
    conditions, closed = stream_error(server, start + b"x" * (64 * 1024 + 1024 - len(start)))
    assert stream_condition(conditions) == "policy-violation"
    assert closed, "no </stream:stream> after the stream error"


BILLION_LAUGHS = b"".join(
    [b"<!DOCTYPE stream:stream [<!ENTITY lol0 'lol'>"]
    + [f"<!ENTITY lol{i} '{('&lol%d;' % (i - 1)) * 10}'>".encode() for i in range(1, 10)]
    + [b"]>"]
)


@pytest.mark.parametrize(
    "before_open, after_open",
    [
        pytest.param(BILLION_LAUGHS, b"<message><body>&lol9;</body></message>", id="doctype-billion-laughs"),
        pytest.param(b"", b"<!-- a comment -->", id="comment"),
        pytest.param(b"", b"<message to='bob@localhost'><body>&xxe;</body></message>", id="entity-reference"),
    ],
)
def test_restricted_xml(tolk, before_open, after_open):
    """RFC 6120 11.1. tolk only: Prosody 0.12 detects these but closes with not-well-formed."""
    conditions, closed = stream_error(tolk, after_open, before_open=before_open)
    assert stream_condition(conditions) == "restricted-xml"
    assert closed, "no </stream:stream> after the stream error"


# ---------------------------------------------------------------------------------------------
# tolk only: SASL ANONYMOUS, wildcard nodes and MQTT on the other side


def test_sasl_anonymous(tolk):
    async def main():
        client = Client(tolk, None, mechanism="ANONYMOUS")
        async with client:
            assert client.mechanism == "ANONYMOUS"
            assert client.tls is not None
            bound = client.xmpp.boundjid
            assert bound.domain == tolk.domain and bound.resource, bound.full
            pong = await client.iq("get", tolk.domain, ET.Element(f"{{{NS_PING}}}ping"))
            assert pong.get("type") == "result"

    run(main())


class Mqtt:
    """A paho MQTT 5 client of tolk whose SUBACKs and messages can be waited for."""

    def __init__(self, broker):
        self.messages, self.subacks = queue.Queue(), queue.Queue()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"xmpp-{uuid.uuid4().hex[:8]}", protocol=mqtt.MQTTv5)
        self.client.on_message = lambda _c, _u, message: self.messages.put(message)
        self.client.on_subscribe = lambda _c, _u, mid, codes, _p: self.subacks.put((mid, codes))
        connected = threading.Event()
        self.client.on_connect = lambda *args: connected.set()
        self.client.connect(broker.host, broker.port("mqtt"))
        self.client.loop_start()
        assert connected.wait(TIMEOUT), "no CONNACK"

    def subscribe(self, topic):
        _, mid = self.client.subscribe(topic, qos=1)
        got, codes = self.subacks.get(timeout=TIMEOUT)
        assert got == mid and [c.value for c in codes] == [1], codes

    def publish(self, topic, payload, content_type=None, user_properties=()):
        props = Properties(PacketTypes.PUBLISH)
        if content_type:
            props.ContentType = content_type
        if user_properties:
            props.UserProperty = list(user_properties)
        self.client.publish(topic, payload, qos=1, properties=props).wait_for_publish(TIMEOUT)

    def message(self):
        try:
            return self.messages.get(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no MQTT message within {TIMEOUT}s") from None

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def shim_headers(message):
    headers = message.findall(f"{{{NS_SHIM}}}headers")
    assert len(headers) <= 1, show(message)
    if not headers:
        return {}
    return {h.get("name"): h.text or "" for h in headers[0].findall(f"{{{NS_SHIM}}}header")}


def test_wildcard_node_receives_mqtt_text_binary_and_xml(tolk):
    base = unique("wild")
    binary = bytes([0, 1, 2, 0xFF, 0xFE, 0x80, 10, 0])

    async def main():
        publisher = await asyncio.to_thread(Mqtt, tolk.broker)
        try:
            async with Client(tolk, "bob", "wild") as bob:
                subscribed(await bob.subscribe(f"{base}/+/temp"), f"{base}/+/temp", bob.jid)

                await asyncio.to_thread(
                    publisher.publish, f"{base}/room1/temp", "21.5 °C".encode(), "text/plain", [("x-unit", "celsius")]
                )
                message = await bob.event()
                item = event_item(message, f"{base}/room1/temp", tolk)
                [payload] = list(item)
                assert payload.tag == f"{{{NS_TOLK_PAYLOAD}}}Payload"
                assert payload.attrib == {"encoding": "text", "contentType": "text/plain"}
                assert payload.text == "21.5 °C"
                assert shim_headers(message) == {"Content-Type": "text/plain", "x-unit": "celsius"}

                # Not matched by the filter: must not come before the next one.
                await asyncio.to_thread(publisher.publish, f"{base}/room1/humidity", b"40")
                await asyncio.to_thread(publisher.publish, f"{base}/room2/temp", binary)
                message = await bob.event()
                item = event_item(message, f"{base}/room2/temp", tolk)
                [payload] = list(item)
                assert payload.tag == f"{{{NS_TOLK_PAYLOAD}}}Payload"
                assert payload.attrib == {"encoding": "base64"}
                assert base64.b64decode(payload.text) == binary
                assert shim_headers(message) == {}

                await asyncio.to_thread(publisher.publish, f"{base}/room3/temp", READING.encode(), "application/xml")
                message = await bob.event()
                item = event_item(message, f"{base}/room3/temp", tolk)
                [payload] = list(item)
                assert xml_equal(payload, ET.fromstring(READING)), show(payload)
                assert shim_headers(message) == {"Content-Type": "application/xml"}
                assert bob.events.empty(), f"unexpected event: {show(bob.events.get_nowait())}"
        finally:
            publisher.close()

    run(main())


def test_xmpp_items_reach_an_mqtt_subscriber(tolk):
    base = unique("to-mqtt")
    text = "héllo from XMPP ✓ <not a tag> & more"

    async def main():
        subscriber = await asyncio.to_thread(Mqtt, tolk.broker)
        try:
            await asyncio.to_thread(subscriber.subscribe, f"{base}/#")
            async with Client(tolk, "alice", "to-mqtt") as alice:
                payload = ET.Element(f"{{{NS_TOLK_PAYLOAD}}}Payload", {"encoding": "text"})
                payload.text = text
                published_id(await alice.publish(f"{base}/text", payload, id="t1"), f"{base}/text")
                message = await asyncio.to_thread(subscriber.message)
                assert message.topic == f"{base}/text"
                assert message.payload == text.encode()

                published_id(await alice.publish(f"{base}/xml", ET.fromstring(READING), id="x1"), f"{base}/xml")
                message = await asyncio.to_thread(subscriber.message)
                assert message.topic == f"{base}/xml"
                assert xml_equal(ET.fromstring(message.payload), ET.fromstring(READING)), message.payload
        finally:
            subscriber.close()

    run(main())
