#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into corpus/<target>/seed-*.

The frames come from the crates' golden tests (STOMP 1.2 specification examples in
codecs/stomp/tests/golden.rs, MQTT-SN 1.2 field tables in codecs/mqttsn/tests/golden.rs, the
zeep documents in codecs/wsn-xml/tests/golden/zeep) or are built here field by field from the
MQTT 3.1.1/5.0 and AMQP 0-9-1 specifications, in the input layout each target documents at
its top. Run from anywhere: `python3 fuzz/seeds.py`. Existing seed-* files are rewritten;
inputs found by fuzzing (named by hash) are left alone.
"""

import pathlib
import re
import struct

ROOT = pathlib.Path(__file__).resolve().parent
REPO = ROOT.parent
CORPUS = ROOT / "corpus"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(bytes(data))


# ---------------------------------------------------------------- STOMP

STOMP_GOLDEN = [
    b"CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\0",
    b"STOMP\naccept-version:1.2\nhost:stomp.github.org\n\n\0",
    b"CONNECTED\nversion:1.2\n\n\0",
    b"CONNECT\naccept-version:1.0,1.1,2.0\nhost:stomp.github.org\n\n\0",
    b"ERROR\nversion:1.2,2.1\ncontent-type:text/plain\n\nSupported protocol versions are 1.2 2.1\0",
    b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\0",
    b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\0",
    b"UNSUBSCRIBE\nid:0\n\n\0",
    b"ACK\nid:12345\ntransaction:tx1\n\n\0",
    b"NACK\nid:12345\ntransaction:tx1\n\n\0",
    b"BEGIN\ntransaction:tx1\n\n\0",
    b"COMMIT\ntransaction:tx1\n\n\0",
    b"ABORT\ntransaction:tx1\n\n\0",
    b"DISCONNECT\nreceipt:77\n\0",
    b"RECEIPT\nreceipt-id:77\n\0",
    b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\0",
    b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0",
]
STOMP_EXTRA = [
    # content-length framed body with a NUL inside, CRLF line ends, escapes (1.2), heart-beats.
    b"SEND\ndestination:/topic/a\ncontent-length:5\n\nab\0cd\0",
    b"SEND\r\ndestination:/topic/a\r\n\r\nhi\0\r\n\n",
    b"SEND\ndestination:/topic/a\\cb\nx\\\\y:1\\n2\\r\n\nbody\0",
    b"\n\n\r\nSUBSCRIBE\nid:1\ndestination:/topic/a\n\n\0\n",
]

for i, wire in enumerate(STOMP_GOLDEN + STOMP_EXTRA):
    # mode 3 = STOMP 1.2 negotiated; split 0 = whole, 1 = byte by byte, 5 = chunks of 1..5.
    write("stomp_decode", f"{i:02}-v12", bytes([3, [0, 1, 5][i % 3]]) + wire)
write("stomp_decode", "connect-pre-negotiation", bytes([0, 3]) + STOMP_GOLDEN[0])
write("stomp_decode", "v11-escapes", bytes([2, 0]) + STOMP_EXTRA[2])
write("stomp_decode", "small-limits", bytes([7, 2]) + STOMP_GOLDEN[4])


def stomp(command, headers, body=b""):
    out = command.encode() + b"\n"
    for k, v in headers:
        out += f"{k}:{v}\n".encode()
    return out + b"\n" + body + b"\0"


CONNECT12 = stomp("CONNECT", [("accept-version", "1.0,1.1,1.2"), ("host", "tolk"), ("heart-beat", "0,0")])
write("stomp_session", "topic-pubsub", CONNECT12
      + stomp("SUBSCRIBE", [("id", "0"), ("destination", "/topic/a.b"), ("ack", "auto")])
      + stomp("SEND", [("destination", "/topic/a.b"), ("content-type", "text/plain"), ("receipt", "r1")], b"hello")
      + stomp("UNSUBSCRIBE", [("id", "0")])
      + stomp("DISCONNECT", [("receipt", "77")]))
write("stomp_session", "queue-ack", CONNECT12
      + stomp("SUBSCRIBE", [("id", "q"), ("destination", "/queue/work"), ("ack", "client-individual")])
      + stomp("SEND", [("destination", "/queue/work"), ("content-length", "3")], b"a\0b")
      + stomp("SEND", [("destination", "/queue/work"), ("persistent", "true")], b"two")
      + stomp("ACK", [("id", "1")])
      + stomp("NACK", [("id", "2")])
      + stomp("DISCONNECT", []))
write("stomp_session", "transaction", CONNECT12
      + stomp("SUBSCRIBE", [("id", "0"), ("destination", "/topic/t"), ("ack", "client")])
      + stomp("BEGIN", [("transaction", "tx1")])
      + stomp("SEND", [("destination", "/topic/t"), ("transaction", "tx1")], b"in tx")
      + stomp("COMMIT", [("transaction", "tx1")])
      + stomp("BEGIN", [("transaction", "tx2")])
      + stomp("ACK", [("id", "1"), ("transaction", "tx2")])
      + stomp("ABORT", [("transaction", "tx2")]))
write("stomp_session", "stomp10-no-version", stomp("CONNECT", [("login", "guest"), ("passcode", "guest")])
      + stomp("SEND", [("destination", "/topic/x")], b"1.0 body"))
write("stomp_session", "stomp-command-v11", stomp("STOMP", [("accept-version", "1.1"), ("host", "h")])
      + stomp("SUBSCRIBE", [("id", "a\\cb"), ("destination", "/topic/a")])
      + b"\n\n" + stomp("SEND", [("destination", "/topic/a"), ("x\\nhdr", "v\\\\1")], b"esc"))
write("stomp_session", "reply-to-receipt-error", CONNECT12
      + stomp("SEND", [("destination", "/queue/req"), ("reply-to", "/temp-queue/r"), ("receipt", "9")], b"q")
      + stomp("SEND", [("receipt", "10")], b"no destination"))


# ---------------------------------------------------------------- MQTT


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def s16(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack(">H", len(s)) + s


def packet(first, body):
    return bytes([first]) + varint(len(body)) + body


def props(*items):
    body = b"".join(items)
    return varint(len(body)) + body


def connect(level, client_id, clean=True, keep_alive=60, will=None, user=None, password=None, properties=b""):
    flags = (0x02 if clean else 0)
    payload = s16(client_id)
    if will is not None:
        topic, message, qos, retain = will
        flags |= 0x04 | (qos << 3) | (0x20 if retain else 0)
        payload += (props() if level == 5 else b"") + s16(topic) + s16(message)
    if user is not None:
        flags |= 0x80
        payload += s16(user)
    if password is not None:
        flags |= 0x40
        payload += s16(password)
    head = s16("MQTT") + bytes([level, flags]) + struct.pack(">H", keep_alive)
    if level == 5:
        head += props(properties)
    return packet(0x10, head + payload)


def subscribe(level, pid, filters, properties=b""):
    body = struct.pack(">H", pid) + (props(properties) if level == 5 else b"")
    for f, opts in filters:
        body += s16(f) + bytes([opts])
    return packet(0x82, body)


def unsubscribe(level, pid, filters):
    body = struct.pack(">H", pid) + (props() if level == 5 else b"")
    for f in filters:
        body += s16(f)
    return packet(0xA2, body)


def publish(level, topic, payload, qos=0, pid=None, retain=False, dup=False, properties=b""):
    first = 0x30 | (qos << 1) | (1 if retain else 0) | (0x08 if dup else 0)
    body = s16(topic) + (struct.pack(">H", pid) if qos else b"") + (props(properties) if level == 5 else b"")
    return packet(first, body + payload)


def ack(first, pid):
    return packet(first, struct.pack(">H", pid))


PINGREQ = b"\xc0\x00"
DISCONNECT = b"\xe0\x00"


def v5prop_u16(ident, v):
    return bytes([ident]) + struct.pack(">H", v)


def v5prop_u32(ident, v):
    return bytes([ident]) + struct.pack(">I", v)


def v5prop_str(ident, v):
    return bytes([ident]) + s16(v)


def mqtt_conversation(level):
    out = connect(level, f"fuzz-{level}", will=("will/t", "gone", 1, False))
    out += subscribe(level, 1, [("a/#", 1), ("a/+/c", 2)])
    out += publish(level, "a/b", b"qos0", retain=True)
    out += publish(level, "a/b", b"qos1", qos=1, pid=2)
    out += ack(0x40, 1)  # PUBACK for the broker's first delivery
    out += publish(level, "a/x/c", b"qos2", qos=2, pid=3)
    out += ack(0x62, 3)  # PUBREL
    out += ack(0x50, 2)  # PUBREC for a delivery
    out += ack(0x70, 2)  # PUBCOMP
    out += PINGREQ
    out += unsubscribe(level, 4, ["a/#"])
    return out + DISCONNECT


write("mqtt_session", "v311-conversation", mqtt_conversation(4))
write("mqtt_session", "v5-conversation", mqtt_conversation(5))
write("mqtt_session", "v31-mqisdp", packet(0x10, s16("MQIsdp") + bytes([3, 0x02]) + struct.pack(">H", 10) + s16("old"))
      + publish(4, "x", b"y") + DISCONNECT)
write("mqtt_session", "v5-properties", connect(5, "", clean=False, properties=v5prop_u32(0x11, 60) + v5prop_u16(0x21, 4)
                                               + v5prop_u16(0x22, 8) + v5prop_u32(0x27, 4096))
      + subscribe(5, 7, [("$share/g/s/#", 0x01), ("s/+", 0x2D)], properties=bytes([0x0B, 0x05]))
      + publish(5, "s/1", b"aliased", qos=1, pid=8, properties=v5prop_u16(0x23, 1) + v5prop_str(0x03, "text/plain")
                + bytes([0x26]) + s16("k") + s16("v") + v5prop_u32(0x02, 30) + v5prop_str(0x08, "reply/t")
                + bytes([0x09]) + s16(b"\x01\x02") + bytes([0x01, 0x01]))
      + publish(5, "", b"by alias", qos=0, properties=v5prop_u16(0x23, 1))
      + packet(0xE0, bytes([0x04]) + props(v5prop_u32(0x11, 0))))
write("mqtt_session", "v311-auth-retain-clear", connect(4, "u", user="guest", password="secret", keep_alive=0)
      + publish(4, "r/t", b"keep", qos=1, pid=1, retain=True)
      + publish(4, "r/t", b"", retain=True)
      + subscribe(4, 2, [("r/#", 1), ("bad/#/x", 0)]))
write("mqtt_session", "v5-self-congestion", connect(5, "self") + subscribe(5, 1, [("loop", 1)])
      + b"".join(publish(5, "loop", b"x" * 64, qos=1, pid=p) for p in range(1, 20)))

for name, data in [("v311-conversation", mqtt_conversation(4)), ("v5-conversation", mqtt_conversation(5))]:
    level5 = name.startswith("v5")
    mode = (1 if level5 else 0) | 0x02  # decode_connect first
    write("mqtt_decode", name, bytes([mode, 0]) + data)
    write("mqtt_decode", name + "-split", bytes([mode | 0x08, 3]) + data)
write("mqtt_decode", "golden-311-connect", bytes([2, 1]) + b"\x10\x0e\x00\x04MQTT\x04\x02\x00\x3c\x00\x02ab")
write("mqtt_decode", "golden-5-connect-empty-id", bytes([3, 0]) + b"\x10\x0d\x00\x04MQTT\x05\x00\x00\x3c\x00\x00\x00")
write("mqtt_decode", "golden-311-publish", bytes([0, 2]) + b"\x32\x09\x00\x03a/b\x00\x0ahi")
write("mqtt_decode", "v5-properties-small-limit", bytes([0x05, 0]) + publish(5, "s/1", b"p", qos=1, pid=8,
      properties=v5prop_u16(0x23, 1) + v5prop_str(0x03, "text/plain")))

# ---------------------------------------------------------------- AMQP 0-9-1


def sstr(s):
    s = s.encode() if isinstance(s, str) else s
    return bytes([len(s)]) + s


def lstr(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack(">I", len(s)) + s


def table(entries):
    body = b""
    for key, kind, value in entries:
        body += sstr(key) + kind.encode() + value
    return struct.pack(">I", len(body)) + body


def frame(kind, channel, payload):
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


def method(channel, class_id, method_id, args=b""):
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + args)


def content(channel, body, content_type="text/plain", delivery_mode=2, headers=None):
    flags = 0x8000 | 0x1000
    prop = sstr(content_type)
    if headers is not None:
        flags |= 0x2000
        prop += table(headers)
    prop += bytes([delivery_mode])
    header = frame(2, channel, struct.pack(">HHQH", 60, 0, len(body), flags) + prop)
    return header + (frame(3, channel, body) if body else b"")


AMQP_HEADER = b"AMQP\x00\x00\x09\x01"
HANDSHAKE = (
    method(0, 10, 11, table([("product", "S", lstr("fuzz")), ("capabilities", "F",
                                                                   table([("publisher_confirms", "t", b"\x01")]))])
           + sstr("PLAIN") + lstr(b"\0guest\0guest") + sstr("en_US"))
    + method(0, 10, 31, struct.pack(">HIH", 2047, 131072, 0))
    + method(0, 10, 40, sstr("/") + sstr("") + b"\x00")
)


def amqp_conversation():
    out = AMQP_HEADER + HANDSHAKE
    out += method(1, 20, 10, sstr(""))
    out += method(1, 40, 10, struct.pack(">H", 0) + sstr("ex") + sstr("topic") + b"\x00" + table([]))
    out += method(1, 50, 10, struct.pack(">H", 0) + sstr("q") + b"\x00"
                  + table([("x-max-length", "I", struct.pack(">i", 5)), ("x-message-ttl", "l", struct.pack(">q", 1000))]))
    out += method(1, 50, 20, struct.pack(">H", 0) + sstr("q") + sstr("ex") + sstr("a.*") + b"\x00" + table([]))
    out += method(1, 60, 10, struct.pack(">IHB", 0, 10, 0))
    out += method(1, 60, 20, struct.pack(">H", 0) + sstr("q") + sstr("ctag") + b"\x00" + table([]))
    out += method(1, 60, 40, struct.pack(">H", 0) + sstr("ex") + sstr("a.b") + b"\x00")
    out += content(1, b"hello", headers=[("h", "S", lstr("v")), ("n", "d", struct.pack(">d", 1.5))])
    out += method(1, 60, 80, struct.pack(">QB", 1, 0))
    out += method(1, 60, 40, struct.pack(">H", 0) + sstr("") + sstr("q") + b"\x00")
    out += content(1, b"")
    out += method(1, 60, 70, struct.pack(">H", 0) + sstr("q") + b"\x00")
    out += method(1, 60, 120, struct.pack(">QB", 0, 0x03))
    out += method(1, 60, 30, sstr("ctag") + b"\x00")
    out += method(1, 20, 40, struct.pack(">H", 200) + sstr("bye") + struct.pack(">HH", 0, 0))
    out += method(0, 10, 50, struct.pack(">H", 200) + sstr("bye") + struct.pack(">HH", 0, 0))
    return out


def amqp_topic_bridge():
    out = AMQP_HEADER + HANDSHAKE + method(2, 20, 10, sstr(""))
    out += method(2, 85, 10, b"\x00")  # confirm.select
    out += method(2, 50, 10, struct.pack(">H", 0) + sstr("") + b"\x0a" + table([]))  # server-named, exclusive, auto-delete
    out += method(2, 50, 20, struct.pack(">H", 0) + sstr("") + sstr("amq.topic") + sstr("sensors.#") + b"\x00" + table([]))
    out += method(2, 60, 20, struct.pack(">H", 0) + sstr("") + sstr("") + b"\x02" + table([]))  # no-ack
    out += method(2, 60, 40, struct.pack(">H", 0) + sstr("amq.topic") + sstr("sensors.t1") + b"\x01")
    out += content(2, b"21.5" * 300)
    out += frame(8, 0, b"")
    out += method(2, 90, 10)  # tx.select
    out += method(2, 60, 40, struct.pack(">H", 0) + sstr("amq.topic") + sstr("sensors.t2") + b"\x00")
    out += content(2, b"tx")
    out += method(2, 90, 20)  # tx.commit
    out += method(2, 50, 40, struct.pack(">H", 0) + sstr("") + b"\x00")  # queue.delete
    return out


write("amqp_session", "conversation", amqp_conversation())
write("amqp_session", "topic-bridge-confirms-tx", amqp_topic_bridge())
write("amqp_session", "wrong-protocol", b"AMQP\x01\x01\x00\x09")
write("amqp_frame", "conversation", bytes([1, 0]) + amqp_conversation())
write("amqp_frame", "conversation-split", bytes([1, 7]) + amqp_conversation())
write("amqp_frame", "bridge-small-frame-max", bytes([3, 1]) + amqp_topic_bridge())
# crates/amqp/src/frame.rs golden frames: heartbeat, channel.open on channel 1, body "hi",
# content header with body size 5.
write("amqp_frame", "golden-frames", bytes([0, 0]) + bytes([8, 0, 0, 0, 0, 0, 0, 0xCE])
      + bytes([1, 0, 1, 0, 0, 0, 5, 0, 20, 0, 10, 0, 0xCE]) + bytes([3, 0, 2, 0, 0, 0, 2, ord("h"), ord("i"), 0xCE])
      + bytes([2, 0, 1, 0, 0, 0, 14, 0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0xCE]))

# ---------------------------------------------------------------- MQTT-SN

src = (REPO / "codecs/mqttsn/tests/golden.rs").read_text()
golden_sn = []
for m in re.finditer(r'\(\s*(?://[^\n]*\n\s*)*"([^"]+)",\s*vec!\[([^\]]*)\]', src):
    name, body = m.group(1), m.group(2)
    octets = []
    for tok in body.split(","):
        tok = tok.strip()
        if not tok:
            continue
        ch = re.fullmatch(r"b'(.)'", tok)
        octets.append(ord(ch.group(1)) if ch else int(tok, 0))
    golden_sn.append((name, bytes(octets)))
assert len(golden_sn) >= 28, f"found only {len(golden_sn)} MQTT-SN golden messages"
for i, (name, octets) in enumerate(golden_sn):
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    write("mqttsn_decode", f"{i:02}-{slug}", bytes([[0, 1, 3][i % 3]]) + octets)
write("mqttsn_decode", "stream-all", bytes([5]) + b"".join(o for _, o in golden_sn))


def sn(msg_type, body=b""):
    n = 2 + len(body)
    return (bytes([n]) if n < 256 else b"\x01" + struct.pack(">H", n + 2)) + bytes([msg_type]) + body


def sn_connect(client_id, will=False, clean=True, duration=60):
    flags = (0x08 if will else 0) | (0x04 if clean else 0)
    return sn(0x04, bytes([flags, 0x01]) + struct.pack(">H", duration) + client_id.encode())


def sn_register(msg_id, name):
    return sn(0x0A, struct.pack(">HH", 0, msg_id) + name.encode())


def sn_publish(topic_id, msg_id, data, qos=0, topic_type=0, retain=False):
    qbits = {0: 0x00, 1: 0x20, 2: 0x40, -1: 0x60}[qos]
    flags = qbits | (0x10 if retain else 0) | topic_type
    topic = topic_id if isinstance(topic_id, bytes) else struct.pack(">H", topic_id)
    return sn(0x0C, bytes([flags]) + topic + struct.pack(">H", msg_id) + data)


def sn_subscribe(msg_id, name, qos=1):
    return sn(0x12, bytes([qos << 5]) + struct.pack(">H", msg_id) + name.encode())


def sn_puback(topic_id, msg_id):
    return sn(0x0D, struct.pack(">HHB", topic_id, msg_id, 0))


def dgrams(*items):
    """Datagrams for mqttsn_session: (client, octets) each behind its one-byte header."""
    out = b""
    for client, octets in items:
        if len(octets) < 127:
            out += bytes([(client << 7) | len(octets)]) + octets
        else:
            out += bytes([(client << 7) | 0x7F]) + struct.pack(">H", len(octets)) + octets
    return out


write("mqttsn_session", "pubsub-one-client", dgrams(
    (0, sn(0x01, b"\x00")),
    (0, sn_connect("c0")),
    (0, sn_register(1, "a/b")),
    (0, sn_subscribe(2, "a/#")),
    (0, sn_publish(1, 3, b"hi", qos=1)),
    (0, sn_puback(1, 1)),
    (0, sn_publish(b"ab", 4, b"short", qos=2, topic_type=2)),
    (0, sn(0x10, struct.pack(">H", 4))),  # PUBREL
    (0, sn(0x16)),
    (0, sn(0x14, b"\x00" + struct.pack(">H", 5) + b"a/#")),
    (0, sn(0x18)),
))
write("mqttsn_session", "will-sleep-two-clients", dgrams(
    (0, sn_connect("sleepy", will=True, clean=False)),
    (0, sn(0x07, b"\x30" + b"will/t")),  # WILLTOPIC QoS1 retain
    (0, sn(0x09, b"bye")),  # WILLMSG
    (1, sn_connect("other")),
    (1, sn_subscribe(1, "will/#")),
    (1, sn_subscribe(2, "s/+", qos=2)),
    (0, sn(0x18, struct.pack(">H", 30))),  # DISCONNECT with a sleep duration
    (1, sn_register(3, "s/1")),
    (1, sn_publish(1, 4, b"for the sleeper", qos=1)),
    (0, sn(0x16, b"sleepy")),  # PINGREQ with client id: wake up
    (0, sn(0x1A, b"\x20" + b"will/u")),  # WILLTOPICUPD
    (0, sn(0x1C, b"new will")),  # WILLMSGUPD
    (1, sn_connect("sleepy")),  # takes the id over
    (1, sn_publish(b"\x00\x01", 0, b"anonymous", qos=-1, topic_type=1)),
))
write("mqttsn_session", "long-form-and-malformed", dgrams(
    (0, sn_connect("big")),
    (0, sn_register(1, "big/t")),
    (0, sn_publish(1, 2, b"x" * 300, qos=1)),
    (1, sn_publish(1, 3, b"not connected", qos=1)),
    (0, b"\x05\x0c"),
    (0, b""),
    (1, sn(0xFE, b"\x01\x12\x34") + sn(0x16)),  # encapsulated
))
write("mqttsn_session", "predefined-and-qos-minus-one", dgrams(
    (0, sn_publish(b"ab", 0, b"anon short", qos=-1, topic_type=2)),
    (0, sn_connect("p", duration=0)),
    (0, sn(0x12, b"\x21" + struct.pack(">HH", 6, 1))),  # SUBSCRIBE predefined id 1
    (0, sn(0x12, b"\x22" + struct.pack(">H", 7) + b"ab")),  # SUBSCRIBE short name
    (0, sn(0x0B, struct.pack(">HHB", 1, 1, 0))),  # REGACK from the client
))

# ---------------------------------------------------------------- WS-N

SOAP11 = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
WSA = "http://www.w3.org/2005/08/addressing"
WSNT = "http://docs.oasis-open.org/wsn/b-2"
WSNBR = "http://docs.oasis-open.org/wsn/br-2"
CONCRETE = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete"
FULL = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full"
SIMPLE = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple"


def envelope(body, soap=SOAP11, action=None, message_id="urn:uuid:1"):
    header = ""
    if action:
        header = (f'<s:Header><wsa:Action>{action}</wsa:Action>'
                  f'<wsa:MessageID>{message_id}</wsa:MessageID></s:Header>')
    return (f'<?xml version="1.0" encoding="utf-8"?><s:Envelope xmlns:s="{soap}" xmlns:wsa="{WSA}" '
            f'xmlns:wsnt="{WSNT}" xmlns:br="{WSNBR}">{header}<s:Body>{body}</s:Body></s:Envelope>').encode()


def subscribe_body(consumer, topic="tns:a/b", dialect=CONCRETE, extra=""):
    return (f'<wsnt:Subscribe><wsnt:ConsumerReference><wsa:Address>{consumer}</wsa:Address></wsnt:ConsumerReference>'
            f'<wsnt:Filter><wsnt:TopicExpression Dialect="{dialect}" xmlns:tns="urn:t">{topic}</wsnt:TopicExpression>'
            f'</wsnt:Filter><wsnt:InitialTerminationTime>PT10M</wsnt:InitialTerminationTime>{extra}</wsnt:Subscribe>')


def notify_body(topic="tns:a/b", payload='<m:v xmlns:m="urn:m" unit="C">21.5</m:v>'):
    return (f'<wsnt:Notify><wsnt:NotificationMessage><wsnt:Topic Dialect="{CONCRETE}" xmlns:tns="urn:t">{topic}'
            f'</wsnt:Topic><wsnt:Message>{payload}</wsnt:Message></wsnt:NotificationMessage></wsnt:Notify>')


def request(target, body, content_type=0, index=0):
    """One wsn_session record: selector byte (path, Content-Type, index) and body."""
    return bytes([target | (content_type << 3) | (index << 5)]) + body


# Target 1 (not 0) for the broker path: a selector byte of 0 would be the record separator.
BROKER, SUBSCRIPTION, PULL_POINT = 1, 3, 4

write("wsn_session", "pull-point-flow", b"\0".join([
    request(BROKER, envelope("<wsnt:CreatePullPoint/>")),
    request(BROKER, envelope(subscribe_body("http://sink/wsn/pullpoints/$PP"))),
    request(BROKER, envelope(notify_body())),
    request(PULL_POINT, envelope("<wsnt:GetMessages><wsnt:MaximumNumber>5</wsnt:MaximumNumber></wsnt:GetMessages>")),
    request(SUBSCRIPTION, envelope("<wsnt:Renew><wsnt:TerminationTime>PT1H</wsnt:TerminationTime></wsnt:Renew>")),
    request(SUBSCRIPTION, envelope("<wsnt:PauseSubscription/>")),
    request(SUBSCRIPTION, envelope("<wsnt:ResumeSubscription/>")),
    request(SUBSCRIPTION, envelope("<wsnt:Unsubscribe/>")),
    request(PULL_POINT, envelope("<wsnt:DestroyPullPoint/>")),
]))
write("wsn_session", "push-flow-soap12", b"\0".join([
    request(BROKER, envelope(subscribe_body("http://sink/consumer", "tns:a//.", FULL,
                                            "<wsnt:SubscriptionPolicy><wsnt:UseRaw/></wsnt:SubscriptionPolicy>"),
                             SOAP12, WSNT + "/Subscribe"), 1),
    request(BROKER, envelope(subscribe_body("http://sink/fail", "tns:a/b"), SOAP12), 1),
    request(BROKER, envelope(subscribe_body("http://sink/slow", "tns:a/*", FULL), SOAP12), 2),
    request(BROKER, envelope(notify_body("tns:a/b", "plain &amp; text"), SOAP12), 1),
    request(BROKER, envelope(notify_body("tns:a/c"), SOAP12), 1),
    request(SUBSCRIPTION, envelope("<wsnt:Unsubscribe/>", SOAP12), 1, 1),
]))
write("wsn_session", "producer-and-faults", b"\0".join([
    request(BROKER, envelope('<br:RegisterPublisher><br:PublisherReference><wsa:Address>http://p</wsa:Address>'
                             '</br:PublisherReference><br:Topic Dialect="' + SIMPLE + '" xmlns:tns="urn:t">tns:a'
                             '</br:Topic><br:Demand>false</br:Demand></br:RegisterPublisher>')),
    request(BROKER, envelope('<wsnt:GetCurrentMessage><wsnt:Topic Dialect="' + SIMPLE + '" xmlns:tns="urn:t">tns:a'
                             '</wsnt:Topic></wsnt:GetCurrentMessage>')),
    request(BROKER, envelope("<x:Frobnicate xmlns:x='urn:x'/>")),
    request(5, envelope("<wsnt:Unsubscribe/>")),
    request(6, envelope("<wsnt:GetMessages/>")),
    request(7, envelope("<wsnt:Unsubscribe/>")),
    request(BROKER, b"<not-soap/>", 3),
    request(BROKER, envelope('<wsnt:Notify/>').replace(b"<s:Body>", b'<s:Header><h:x xmlns:h="urn:h" '
                                                                   b's:mustUnderstand="1"/></s:Header><s:Body>')),
]))
zeep = sorted((REPO / "codecs/wsn-xml/tests/golden/zeep").glob("*.xml"))
for path in zeep:
    write("wsn_xml_parse", path.stem, path.read_bytes())
    if "soap11" in path.stem:
        # The zeep documents address a real device; point the consumer at the sink.
        body = path.read_bytes().replace(b"http://192.168.1.20:9000/consumer", b"http://sink/consumer")
        write("wsn_session", "zeep-" + path.stem, request(BROKER, body))
write("wsn_xml_parse", "pull-point-subscribe", envelope(subscribe_body("http://h/wsn/pullpoints/1"), SOAP12, "urn:a"))
write("wsn_xml_parse", "notify-text-payload", envelope(notify_body("tns:a/b", "text &lt;&amp;&gt;")))
write("wsn_xml_parse", "element-with-prolog", b'<?xml version="1.0"?><!-- c --><a:x xmlns:a="urn:a" a:k="v"><a:y/>t</a:x>')

# ---------------------------------------------------------------- payload re-encoding
# First byte: from (high nibble) and to (low nibble) in Format::ALL order: 0 json, 1 cbor,
# 2 xml, 3 senml_json, 4 senml_cbor, 5 protobuf. Payloads from codecs/payload's unit tests.

def pick(src, dst):
    return bytes([src << 4 | dst])


READING = b'{"t":1,"v":21.5,"ok":true,"n":null,"s":"x","a":[1,"x",true,null]}'
write("payload_convert", "json-to-cbor", pick(0, 1) + READING)
write("payload_convert", "json-to-xml", pick(0, 2) + READING)
write("payload_convert", "json-to-senml", pick(0, 3) + b'{"temp":21.5,"door":"open","on":true}')
write("payload_convert", "cbor-to-json", pick(1, 0) + bytes.fromhex("a3014200ff6164c11a6553f1006166f97e00"))
write("payload_convert", "xml-w3c-to-cbor", pick(2, 1) + b'<map xmlns="http://www.w3.org/2005/xpath-functions">'
      b'<array key="a"><number>1</number><string>x&lt;&amp;</string><boolean>true</boolean><null/></array></map>')
write("payload_convert", "xml-plain-to-json", pick(2, 0) + b'<?xml version="1.0"?><g:reading xmlns:g="urn:g" unit="C">'
      b'<g:sensor>g1</g:sensor><t>21.5</t><t>21.7</t><note lang="en">warm &amp; dry</note><![CDATA[x]]></g:reading>')
write("payload_convert", "senml-json-to-cbor", pick(3, 4) + b'[{"bn":"urn:dev:ow:10e2073a01080063:","n":"temp",'
      b'"u":"Cel","v":23.1,"t":1.276020076e9},{"n":"d","vd":"AP8","vb":false,"vs":"s"}]')
write("payload_convert", "senml-cbor-to-xml", pick(4, 2) + bytes.fromhex("81a30061740201084200ff"))


# ---------------------------------------------------------------- XMPP
# A slixmpp session as it goes over the wire (RFC 6120 §9 examples, XEP-0060 §6-8 requests),
# then hostile inputs RFC 6120 §11.1 forbids. xmpp_stream takes a mode byte (bit 0: small
# limits, bit 1: reset after <starttls/>) and a split byte first; xmpp_session the bytes alone.

XMPP_HEADER = (b"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' "
               b"xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>")
XMPP_SESSION = (XMPP_HEADER
    + b"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>AGFsaWNlAHNlY3JldA==</auth>"
    + XMPP_HEADER
    + b"<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>r</resource></bind></iq>"
    + b"<iq type='get' id='p' to='localhost'><ping xmlns='urn:xmpp:ping'/></iq>"
    + b"<iq type='get' id='d' to='pubsub.localhost'><query xmlns='http://jabber.org/protocol/disco#info'/></iq>"
    + b"<iq type='set' id='s' to='pubsub.localhost'><pubsub xmlns='http://jabber.org/protocol/pubsub'>"
    + b"<subscribe node='a/+' jid='alice@localhost'/></pubsub></iq>"
    + b"<iq type='set' id='u' to='pubsub.localhost'><pubsub xmlns='http://jabber.org/protocol/pubsub'>"
    + b"<publish node='a/b'><item id='1'><entry xmlns='http://www.w3.org/2005/Atom'><title>hi &amp; bye</title>"
    + b"</entry></item></publish></pubsub></iq>"
    + b"<iq type='get' id='i' to='pubsub.localhost'><pubsub xmlns='http://jabber.org/protocol/pubsub'>"
    + b"<items node='a/b'/></pubsub></iq>"
    + b"<iq type='set' id='g' to='pubsub.localhost'><pubsub xmlns='http://jabber.org/protocol/pubsub#owner'>"
    + b"<purge node='a/b'/></pubsub></iq> \n</stream:stream>")
XMPP_HOSTILE = {
    "billion-laughs": XMPP_HEADER + b"<!DOCTYPE l [<!ENTITY a 'aa'><!ENTITY b '&a;&a;'>]><iq>&b;</iq>",
    "before-auth": XMPP_HEADER + b"<iq type='get' id='1'><ping xmlns='urn:xmpp:ping'/></iq>",
    "deep": XMPP_HEADER + b"<iq>" + b"<a>" * 40,
    "starttls-smuggle": XMPP_HEADER + b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>" + XMPP_HEADER,
}
write("xmpp_session", "pubsub", XMPP_SESSION)
write("xmpp_stream", "pubsub", b"\x00\x07" + XMPP_SESSION)
for name, data in XMPP_HOSTILE.items():
    write("xmpp_session", name, data)
    write("xmpp_stream", name, b"\x02\x03" + data)
