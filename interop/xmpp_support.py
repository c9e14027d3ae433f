"""Helpers for interop/test_xmpp.py: a private Debian Prosody (the reference server), slixmpp
clients driven by asyncio with a timeout on every wait, a raw-socket reader of stream errors and
an XML comparison that ignores serialisation details (prefixes, quoting, attribute order)."""

import asyncio
import contextlib
import copy
import shutil
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import slixmpp
import trustme
from slixmpp.exceptions import IqError
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

from conftest import free_port

TIMEOUT = 10

NS_CLIENT = "jabber:client"
NS_STREAM = "http://etherx.jabber.org/streams"
NS_STREAMS = "urn:ietf:params:xml:ns:xmpp-streams"
NS_STANZAS = "urn:ietf:params:xml:ns:xmpp-stanzas"
NS_SASL = "urn:ietf:params:xml:ns:xmpp-sasl"
NS_TLS = "urn:ietf:params:xml:ns:xmpp-tls"
NS_PING = "urn:xmpp:ping"
NS_SESSION = "urn:ietf:params:xml:ns:xmpp-session"
NS_DISCO_INFO = "http://jabber.org/protocol/disco#info"
NS_DISCO_ITEMS = "http://jabber.org/protocol/disco#items"
NS_PUBSUB = "http://jabber.org/protocol/pubsub"
NS_PUBSUB_EVENT = "http://jabber.org/protocol/pubsub#event"
NS_PUBSUB_OWNER = "http://jabber.org/protocol/pubsub#owner"
NS_SHIM = "http://jabber.org/protocol/shim"
# tolk's payload wrapper, shared with WS-Notification (docs/translation.md, "Payloads").
NS_TOLK_PAYLOAD = "urn:tolk:wsn:1"


@dataclass
class XmppServer:
    """Where a test connects: `host`:`port` (STARTTLS, certificate for `domain` from `ca_file`),
    users with their passwords, the pubsub service's JID. `broker` is tolk's `Broker` (for the
    MQTT side of the cross-protocol tests), None for Prosody."""

    name: str
    host: str
    port: int
    domain: str
    pubsub: str
    ca_file: Path
    users: dict = field(default_factory=lambda: {"alice": "secret", "bob": "secret"})
    broker: object = None


def run(coroutine, timeout=45):
    """Runs a test's coroutine on a fresh event loop, failing it after `timeout` seconds."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


# ---------------------------------------------------------------------------------------------
# Prosody

PROSODY_CONFIG = """\
-- Written by interop/xmpp_support.py: a private Prosody for the XMPP interoperability tests.
run_as_root = true  -- CI runs as root in a container; mod_posix refuses root without this
pidfile = "{dir}/prosody.pid"
data_path = "{dir}/data"
certificates = "{dir}/certs"
log = {{ debug = "{dir}/prosody.log" }}
interfaces = {{ "127.0.0.1" }}
c2s_ports = {{ {port} }}
c2s_direct_tls_ports = {{}}
legacy_ssl_ports = {{}}
s2s_ports = {{}}
component_ports = {{}}
http_ports = {{}}
https_ports = {{}}
modules_enabled = {{ "saslauth", "tls", "disco", "ping", "roster" }}
modules_disabled = {{ "s2s", "s2s_auth_certs", "offline" }}
authentication = "internal_plain"
-- STARTTLS is offered; the tests always use it, the raw-socket tests do not need it.
c2s_require_encryption = false
allow_unencrypted_plain_auth = false
-- tolk's limit, so that the raw-socket policy-violation test holds for both servers.
c2s_unauthed_stanza_size_limit = 65536
c2s_stanza_size_limit = 65536
-- mod_pubsub lets only server admins create nodes and publish to nodes they did not create;
-- tolk has no node ownership, so here the test users are admins (owner of every node).
admins = {{ {admins} }}

VirtualHost "{domain}"

Component "pubsub.{domain}" "pubsub"
    autocreate_on_publish = true
    autocreate_on_subscribe = true
"""


def _stream_header(domain):
    return (
        f"<?xml version='1.0'?><stream:stream to='{domain}' xmlns='{NS_CLIENT}' "
        f"xmlns:stream='{NS_STREAM}' version='1.0'>"
    )


def wait_for_stream_features(host, port, domain, process, deadline):
    """Ready means a client gets stream features: Prosody opens its ports before the event loop
    runs, and answers only once every host and component is loaded."""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                s.sendall(_stream_header(domain).encode())
                data = b""
                while b"</stream:features>" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                if b"</stream:features>" in data:
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def prosody(workdir: Path, users=None, domain="localhost"):
    """Debian's Prosody as a private server in `workdir` on a free loopback port, with `users`
    (name → password) registered; yields its `XmppServer` and stops it afterwards."""
    users = users or {"alice": "secret", "bob": "secret"}
    binary = shutil.which("prosody") or "/usr/bin/prosody"
    prosodyctl = shutil.which("prosodyctl") or "/usr/bin/prosodyctl"
    port = free_port()
    (workdir / "data").mkdir()
    certs = workdir / "certs"
    certs.mkdir()
    ca = trustme.CA()
    cert = ca.issue_cert(domain, "127.0.0.1")
    ca_file = workdir / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    # Prosody finds <host>.crt / <host>.key in `certificates` by itself.
    cert.cert_chain_pems[0].write_to_path(str(certs / f"{domain}.crt"))
    cert.private_key_pem.write_to_path(str(certs / f"{domain}.key"))
    config = workdir / "prosody.cfg.lua"
    admins = ", ".join(f'"{user}@{domain}"' for user in users)
    config.write_text(PROSODY_CONFIG.format(dir=workdir, port=port, domain=domain, admins=admins))
    for user, password in users.items():
        subprocess.run(
            [prosodyctl, "--config", str(config), "register", user, domain, password],
            check=True, capture_output=True, timeout=30,
        )
    out = open(workdir / "prosody.out", "w")
    process = subprocess.Popen([binary, "-F", "--config", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        if not wait_for_stream_features("127.0.0.1", port, domain, process, time.monotonic() + 30):
            log = workdir / "prosody.log"
            raise RuntimeError(
                f"prosody did not start (exit {process.poll()}):\n{(workdir / 'prosody.out').read_text()}\n"
                + (log.read_text()[-4000:] if log.exists() else "")
            )
        yield XmppServer("prosody", "127.0.0.1", port, domain, f"pubsub.{domain}", ca_file, dict(users))
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            raise RuntimeError("prosody did not stop within 10 s of SIGTERM") from None
        finally:
            out.close()
    if process.returncode != 0:
        raise RuntimeError(f"prosody exited with {process.returncode}:\n{(workdir / 'prosody.out').read_text()}")


# ---------------------------------------------------------------------------------------------
# slixmpp clients


class Client:
    """A slixmpp client of `server` as `user`/`resource`: STARTTLS (certificate checked against
    the server's CA), SASL PLAIN only. Construct it inside the running event loop and use it as
    `async with`. `events` queues a copy of every pubsub event message's XML; `features` keeps
    every <stream:features> the server sent, in order."""

    def __init__(self, server: XmppServer, user, resource="test", password=None, mechanism="PLAIN"):
        self.server = server
        jid = f"{user}@{server.domain}/{resource}" if user else server.domain
        if password is None:
            password = server.users.get(user, "")
        self.xmpp = slixmpp.ClientXMPP(jid, password, sasl_mech=mechanism)
        self.xmpp.ca_certs = str(server.ca_file)
        self.xmpp.enable_direct_tls = False
        self.xmpp.enable_plaintext = False
        self.xmpp.enable_starttls = True
        self.xmpp.reconnect_max_attempts = 0
        for plugin in ("xep_0030", "xep_0060", "xep_0199"):
            self.xmpp.register_plugin(plugin)
        self.events = asyncio.Queue()
        self.features = []
        self.auth_failures = asyncio.Queue()
        self._started = asyncio.Event()
        self.xmpp.register_handler(
            Callback(
                "test pubsub events",
                MatchXPath(f"{{{NS_CLIENT}}}message/{{{NS_PUBSUB_EVENT}}}event"),
                lambda msg: self.events.put_nowait(copy.deepcopy(msg.xml)),
            )
        )
        self.xmpp.register_handler(
            Callback(
                "test stream features",
                MatchXPath(f"{{{NS_STREAM}}}features"),
                lambda features: self.features.append(copy.deepcopy(features.xml)),
            )
        )
        self.xmpp.add_event_handler("session_start", lambda _: self._started.set())
        self.xmpp.add_event_handler("failed_auth", lambda failure: self.auth_failures.put_nowait(copy.deepcopy(failure.xml)))

    @property
    def jid(self):
        return str(self.xmpp.boundjid)

    @property
    def mechanism(self):
        return self.xmpp.plugin["feature_mechanisms"].mech.name

    @property
    def tls(self):
        return self.xmpp.transport.get_extra_info("ssl_object") if self.xmpp.transport else None

    def connect(self):
        self.xmpp.connect(self.server.host, self.server.port)

    async def login(self):
        """Connects and waits for the session (returns None) or a SASL <failure/> (returns it)."""
        self.connect()
        started = asyncio.ensure_future(self._started.wait())
        failed = asyncio.ensure_future(self.auth_failures.get())
        done, pending = await asyncio.wait({started, failed}, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if not done:
            await self.close()
            raise AssertionError(f"neither a session nor a SASL failure for {self.xmpp.requested_jid} within {TIMEOUT}s")
        return failed.result() if failed in done else None

    async def __aenter__(self):
        failure = await self.login()
        if failure is not None:
            await self.close()
            raise AssertionError(f"SASL failure for {self.xmpp.requested_jid}: {show(failure)}")
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self):
        try:
            await asyncio.wait_for(self.xmpp.disconnect(wait=1), TIMEOUT)
        except (asyncio.TimeoutError, ConnectionError):
            self.xmpp.abort()

    # --- plain iq helpers: each returns the reply's XML, or raises IqError with it

    async def iq(self, type, to, payload):
        iq = self.xmpp.Iq(stype=type, sto=to)
        iq.append(payload)
        reply = await iq.send(timeout=TIMEOUT)
        return reply.xml

    async def iq_error(self, type, to, payload):
        """The <error/> element of an iq that must fail."""
        try:
            reply = await self.iq(type, to, payload)
        except IqError as e:
            return e.iq.xml
        raise AssertionError(f"expected an error reply, got {ET.tostring(reply).decode()}")

    async def subscribe(self, node):
        reply = await self.xmpp.plugin["xep_0060"].subscribe(self.server.pubsub, node, bare=False, timeout=TIMEOUT)
        return reply.xml

    async def unsubscribe(self, node):
        reply = await self.xmpp.plugin["xep_0060"].unsubscribe(self.server.pubsub, node, bare=False, timeout=TIMEOUT)
        return reply.xml

    async def publish(self, node, payload, id=None):
        reply = await self.xmpp.plugin["xep_0060"].publish(self.server.pubsub, node, id=id, payload=payload, timeout=TIMEOUT)
        return reply.xml

    async def items(self, node):
        reply = await self.xmpp.plugin["xep_0060"].get_items(self.server.pubsub, node, timeout=TIMEOUT)
        return reply.xml

    async def purge(self, node):
        reply = await self.xmpp.plugin["xep_0060"].purge(self.server.pubsub, node, timeout=TIMEOUT)
        return reply.xml

    async def delete(self, node):
        reply = await self.xmpp.plugin["xep_0060"].delete_node(self.server.pubsub, node, timeout=TIMEOUT)
        return reply.xml

    async def event(self):
        try:
            return await asyncio.wait_for(self.events.get(), TIMEOUT)
        except asyncio.TimeoutError:
            raise AssertionError(f"{self.jid}: no pubsub event within {TIMEOUT}s") from None


# ---------------------------------------------------------------------------------------------
# Raw sockets


def stream_error(server: XmppServer, after_open: bytes, before_open: bytes = b"", timeout=TIMEOUT):
    """Opens a plain-text stream, waits for the stream features, sends `after_open`, and returns
    the element names in the server's <stream:error> and whether </stream:stream> followed it.
    With `before_open` (a prolog such as a DOCTYPE), that, the stream header and `after_open`
    go at once, without waiting for features."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as s:
        header = _stream_header(server.domain).encode()
        if before_open:
            # All at once: a server may answer the prolog before any features.
            s.sendall(b"<?xml version='1.0'?>" + before_open + header.split(b"?>", 1)[1] + after_open)
        else:
            s.sendall(header)
        parser = ET.XMLPullParser(("start", "end"))
        error, closed = None, False
        sent_payload = bool(before_open)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not data:
                break
            try:
                parser.feed(data)
            except ET.ParseError:
                pass
            for event, element in parser.read_events():
                if event == "start":
                    continue
                if element.tag == f"{{{NS_STREAM}}}features" and not sent_payload:
                    sent_payload = True
                    try:
                        s.sendall(after_open)
                    except OSError:
                        pass
                if element.tag == f"{{{NS_STREAM}}}error":
                    error = element
                if element.tag == f"{{{NS_STREAM}}}stream":
                    closed = True
            if closed:
                break
        if error is None:
            raise AssertionError(f"no <stream:error> from {server.name} within {timeout}s")
        conditions = [child.tag for child in error]
        return conditions, closed


# ---------------------------------------------------------------------------------------------
# XML


def canonical(element):
    """(tag, attributes, text, children) with whitespace-only text dropped, so that two elements
    compare equal when they are the same XML whatever the prefixes and quoting."""
    text = (element.text or "").strip() or None
    children = tuple(canonical(child) for child in element)
    tails = tuple((child.tail or "").strip() for child in element)
    assert not any(tails), f"mixed content in {element.tag}"
    return (element.tag, tuple(sorted(element.attrib.items())), text, children)


def xml_equal(a, b):
    return canonical(a) == canonical(b)


def show(element):
    return ET.tostring(element, encoding="unicode")


def find_one(element, path):
    found = element.findall(path)
    assert len(found) == 1, f"{len(found)} × {path} in {show(element)}"
    return found[0]
