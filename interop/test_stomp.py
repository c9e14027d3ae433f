"""STOMP interoperability: stomp.py (protocol 1.2) and @stomp/stompjs (Node, over raw TCP)
against tolk's STOMP listener, plus a raw socket for the heart-beat timeout.

Every test uses its own destinations, so tests do not see each other's messages on the
shared broker.
"""

import queue
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import stomp

TIMEOUT = 5
NODE_DIR = Path(__file__).resolve().parent / "node"


class Collector(stomp.ConnectionListener):
    """Queues what the broker sends, so tests can wait for it with a timeout."""

    def __init__(self):
        self.messages = queue.Queue()
        self.receipts = queue.Queue()
        self.errors = queue.Queue()

    def on_message(self, frame):
        self.messages.put(frame)

    def on_receipt(self, frame):
        self.receipts.put(frame.headers["receipt-id"])

    def on_error(self, frame):
        self.errors.put(frame)

    def message(self):
        try:
            return self.messages.get(timeout=TIMEOUT)
        except queue.Empty:
            errors = list(self.errors.queue)
            raise AssertionError(f"no MESSAGE within {TIMEOUT}s (errors: {errors})") from None

    def receipt(self, receipt_id):
        try:
            got = self.receipts.get(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no RECEIPT {receipt_id} within {TIMEOUT}s") from None
        assert got == receipt_id


def unique(kind):
    return f"/{kind}/interop/{uuid.uuid4().hex[:10]}"


def connect(broker, **kwargs):
    conn = stomp.Connection12([(broker.host, broker.port("stomp"))], timeout=TIMEOUT, **kwargs)
    listener = Collector()
    conn.set_listener("collector", listener)
    conn.connect(wait=True)
    return conn, listener


def subscribe(conn, listener, destination, id, ack="auto"):
    receipt = f"sub-{id}"
    conn.subscribe(destination, id=id, ack=ack, headers={"receipt": receipt})
    listener.receipt(receipt)


def send(conn, listener, destination, body, **headers):
    receipt = f"send-{uuid.uuid4().hex[:8]}"
    conn.send(destination, body, headers={"receipt": receipt, **headers})
    listener.receipt(receipt)


def close(*conns):
    for conn in conns:
        conn.disconnect(receipt=f"bye-{uuid.uuid4().hex[:6]}")


def test_subscribe_send_and_receipts(broker):
    sub, s = connect(broker, heartbeats=(1000, 1000))
    pub, p = connect(broker)
    topic = unique("topic")
    subscribe(sub, s, topic + "/+", "w")
    send(pub, p, topic + "/temp", "21.5", **{"content-type": "text/plain", "x-unit": "celsius", "x-note": "a:b"})
    m = s.message()
    assert m.body == "21.5"
    assert m.headers["destination"] == topic + "/temp"
    assert m.headers["subscription"] == "w"
    assert m.headers["content-type"] == "text/plain"
    assert m.headers["x-unit"] == "celsius"
    assert m.headers["x-note"] == "a:b"
    assert "message-id" in m.headers
    assert "ack" not in m.headers
    close(sub, pub)


def test_unsupported_destination_gets_an_error(broker):
    conn, listener = connect(broker)
    conn.send("/exchange/amq.topic/x", "x")
    error = listener.errors.get(timeout=TIMEOUT)
    assert "/topic/<topic>" in error.headers["message"]
    assert "/queue/<name>" in error.headers["message"]


def test_client_individual_nack_redelivers_on_a_queue(broker):
    q = unique("queue")
    consumer, c = connect(broker)
    producer, p = connect(broker)
    subscribe(consumer, c, q, "work", ack="client-individual")
    for body in ("m1", "m2"):
        send(producer, p, q, body)
    m1, m2 = c.message(), c.message()
    assert (m1.body, m2.body) == ("m1", "m2")
    assert "redelivered" not in m1.headers
    assert m1.headers.get("persistent") == "true"

    consumer.nack(m1.headers["ack"])
    again = c.message()
    assert again.body == "m1"
    assert again.headers.get("redelivered") == "true"

    consumer.ack(again.headers["ack"])
    consumer.ack(m2.headers["ack"], receipt="acked")
    c.receipt("acked")
    send(producer, p, q, "m3")
    assert c.message().body == "m3", "acked messages are not redelivered"
    close(consumer, producer)


def test_unacked_queue_message_is_redelivered_after_disconnect(broker):
    q = unique("queue")
    first, f = connect(broker)
    producer, p = connect(broker)
    subscribe(first, f, q, "a", ack="client")
    send(producer, p, q, "keep me")
    assert f.message().body == "keep me"
    close(first)

    second, s = connect(broker)
    subscribe(second, s, q, "b", ack="client")
    m = s.message()
    assert m.body == "keep me"
    assert m.headers.get("redelivered") == "true"
    second.ack(m.headers["ack"], receipt="done")
    s.receipt("done")
    close(second, producer)


def test_transactions_commit_and_abort(broker):
    topic = unique("topic")
    sub, s = connect(broker)
    pub, p = connect(broker)
    subscribe(sub, s, topic, "t")

    committed = pub.begin()
    aborted = pub.begin()
    send(pub, p, topic, "in commit", transaction=committed)
    send(pub, p, topic, "in abort", transaction=aborted)
    send(pub, p, topic, "outside")
    assert s.message().body == "outside", "transactional sends wait for COMMIT"

    pub.abort(aborted, headers={"receipt": "aborted"})
    p.receipt("aborted")
    pub.commit(committed, headers={"receipt": "committed"})
    p.receipt("committed")
    assert s.message().body == "in commit"
    send(pub, p, topic, "marker")
    assert s.message().body == "marker", "the aborted send never arrives"
    close(sub, pub)


def test_utf8_and_binary_bodies(broker):
    topic = unique("topic") + "/ümlaut"
    sub, s = connect(broker, auto_decode=False)
    pub, p = connect(broker, auto_decode=False)
    subscribe(sub, s, topic, "u")

    text = "Grüße, 世界 🌍"
    send(pub, p, topic, text.encode("utf-8"), **{"content-type": "text/plain;charset=utf-8"})
    m = s.message()
    assert m.body == text.encode("utf-8")
    assert m.headers["destination"] == topic

    binary = bytes(range(256)) + b"\x00\x00\n\x00"
    send(pub, p, topic, binary, **{"content-type": "application/octet-stream"})
    m = s.message()
    assert m.body == binary
    assert m.headers["content-length"] == str(len(binary))
    close(sub, pub)


def read_frame(sock):
    """Reads bytes up to and including the first NUL."""
    data = b""
    while b"\x00" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"connection closed early: {data!r}"
        data += chunk
    return data


def test_silent_client_with_heart_beats_is_dropped(broker):
    with socket.create_connection((broker.host, broker.port("stomp")), timeout=10) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:100,0\n\n\x00")
        connected = read_frame(sock).decode()
        assert connected.startswith("CONNECTED\n"), connected
        offer = next(line for line in connected.split("\n") if line.startswith("heart-beat:"))
        wanted_ms = int(offer.split(":", 1)[1].split(",")[1])
        assert wanted_ms > 0, "the broker asks for heart-beats by default"
        interval = max(100, wanted_ms) / 1000
        assert interval <= 2.5, f"default heart_beat_receive too long for a fast test: {interval}s"

        start = time.monotonic()
        rest = b""
        while True:  # the client says nothing; the broker must give up on it
            chunk = sock.recv(4096)
            if not chunk:
                break
            rest += chunk
        elapsed = time.monotonic() - start
    assert b"ERROR\n" in rest and b"heart-beat timeout" in rest, rest
    assert interval * 1.5 <= elapsed <= interval * 2 + 3, elapsed


def test_stompjs_round_trip(broker):
    node = shutil.which("node")
    assert node, "node is not installed"
    assert (NODE_DIR / "node_modules" / "@stomp" / "stompjs").is_dir(), "run `npm ci` in interop/node first"
    result = subprocess.run(
        [node, str(NODE_DIR / "stomp_roundtrip.mjs"), broker.host, str(broker.port("stomp"))],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=NODE_DIR,
    )
    assert result.returncode == 0, result.stdout + result.stderr
