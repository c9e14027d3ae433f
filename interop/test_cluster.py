"""Three tolk nodes sharing one topic space through a NATS JetStream cluster ([cluster]).

One cluster of three nats-server processes and three nodes serve the whole module; node i is
given NATS server i only (it learns the others from it, for failover), and every message a
test counts crosses NATS from one node to another. A message published
at one node reaches a subscriber at another whatever protocol either side speaks: QoS 1 exactly
once while NATS is healthy, and no acknowledged message lost when the NATS server under the
publisher's node is killed mid-stream.

Interest takes a moment to cross the cluster, so each test first sends probes until one
arrives, and only then the messages it counts. Waits are for events (a message, a state in
/api/cluster) with a deadline; the one fixed wait is a short drain after the last expected
message, where a duplicate would show.
"""

import itertools
import queue
import threading
import time
import uuid

import paho.mqtt.client as paho
import pika
import pytest
import requests
import stomp

from bridging import WAIT, Client, wait_for
from clustering import NatsCluster
from conftest import BINARY, Broker, free_port

MESSAGES = 20
# How long to keep listening for duplicates once every expected message is in.
DRAIN = 0.5
# From the kill of a NATS server until every acknowledged message must have arrived: the
# nodes' reconnection, a JetStream leader election, a pull request lost with the server
# (noticed by its 2 s heartbeats), and the redelivery of what was on its way to a node through
# that server (the consumer's 10 s ack wait) fit in it.
FAILOVER = 30


def payload(i):
    """A different payload per message, with every byte value (NUL, CR, LF, 0xff) in it."""
    return f"{i}:".encode() + bytes(range(256))


def unique(prefix):
    """A topic level of its own per test: letters and digits only, the same in MQTT, STOMP,
    AMQP routing keys and NATS subjects."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def status(node):
    r = requests.get(f"http://127.0.0.1:{node.port('http')}/api/cluster", timeout=5)
    r.raise_for_status()
    return r.json()


def healthz(node):
    return requests.get(f"http://127.0.0.1:{node.port('http')}/healthz", timeout=5).text


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(nats, [n1, n2, n3]), once all three nodes report the cluster up."""
    if not BINARY.exists():
        pytest.exit(f"{BINARY} is missing: build it with `cargo build -p tolk` first", returncode=2)
    nats = NatsCluster(tmp_path_factory.mktemp("nats")).start()
    nodes = []
    try:
        for i in range(3):
            node = Broker(
                tmp_path_factory.mktemp(f"n{i + 1}"),
                top=f'node_name = "n{i + 1}"',
                # Reconnecting quickly keeps the outage test short.
                extra=f'[cluster]\nnats_urls = ["{nats.url(i)}"]\n'
                'reconnect_min = "100ms"\nreconnect_max = "1s"\n',
            )
            nodes.append(node)
            node.start()
        wait_for("all three nodes up in the cluster", lambda: all(status(n)["state"] == "up" for n in nodes))
        # One server listed per node, three learnt from it: the stream and the bucket are R3.
        streams = {}
        for i in range(nats.size):
            _, jsz = nats.monitor(i, "/jsz?streams=true&config=true")
            for account in jsz.get("account_details", []):
                streams.update({st["name"]: st["config"]["num_replicas"] for st in account.get("stream_detail", [])})
        assert streams == {"TOLK": 3, "KV_tolk_retained": 3}, streams
        yield nats, nodes
    finally:
        for node in nodes:
            node.stop()
        nats.stop()
    for node in nodes:
        assert node.process.returncode == 0, f"{node.config} exited with {node.process.returncode}:\n{node.log.read_text()}"


class StompSubscriber(stomp.ConnectionListener):
    """A STOMP 1.2 subscription with client-individual acks (at least once): each MESSAGE is
    acked on arrival and queued as (topic, body, its persistent header)."""

    def __init__(self, node, filter_):
        self.inbox, self.receipts = queue.Queue(), queue.Queue()
        self.conn = stomp.Connection12([("127.0.0.1", node.port("stomp"))], auto_decode=False, timeout=WAIT)
        self.conn.set_listener("inbox", self)
        self.conn.connect(wait=True)
        self.conn.subscribe(f"/topic/{filter_}", id="1", ack="client-individual", receipt="sub")
        assert self.receipts.get(timeout=WAIT) == "sub"

    def on_message(self, frame):
        self.conn.ack(frame.headers["ack"])
        topic = frame.headers["destination"].removeprefix("/topic/")
        self.inbox.put((topic, frame.body, frame.headers.get("persistent")))

    def on_receipt(self, frame):
        self.receipts.put(frame.headers["receipt-id"])

    def close(self):
        self.conn.disconnect()


def acked(client, topic, body, retain=False):
    """Publishes at QoS 1 through a bridging.Client and waits for the PUBACK."""
    info = client.client.publish(topic, body, qos=1, retain=retain)
    info.wait_for_publish(WAIT)
    assert info.is_published(), f"no PUBACK for {topic} within {WAIT}s"


def await_interest(publish, inbox, topic):
    """Publishes probes on `topic` until one reaches `inbox`: from then on the subscription
    behind `inbox` gets what is published the same way."""
    deadline = time.monotonic() + WAIT
    for n in itertools.count():
        publish(topic, f"probe {n}".encode())
        try:
            while inbox.get(timeout=0.2)[0] != topic:
                pass
            return
        except queue.Empty:
            assert time.monotonic() < deadline, f"no probe on {topic} crossed the cluster in {WAIT}s"


def take(inbox, topic, count):
    """The messages on `topic` (probes are on another) until `count` are in, plus any more on
    it that arrive during a short drain."""
    got = []
    deadline = time.monotonic() + WAIT
    while len(got) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"{len(got)} of {count} messages on {topic} arrived; the last: {got[-2:]}"
        try:
            item = inbox.get(timeout=left)
        except queue.Empty:
            continue
        if item[0] == topic:
            got.append(item)
    drained = time.monotonic() + DRAIN
    while (left := drained - time.monotonic()) > 0:
        try:
            item = inbox.get(timeout=left)
        except queue.Empty:
            break
        if item[0] == topic:
            got.append(item)
    return got


def test_mqtt_at_n1_reaches_a_stomp_subscriber_at_n3_once_each(cluster):
    _, (n1, _, n3) = cluster
    base = unique("c")
    sub = StompSubscriber(n3, f"{base}/#")
    pub = Client(n1.port("mqtt"), unique("pub"))
    try:
        await_interest(lambda t, p: acked(pub, t, p), sub.inbox, f"{base}/probe")
        for i in range(MESSAGES):
            acked(pub, f"{base}/data", payload(i))
        got = take(sub.inbox, f"{base}/data", MESSAGES)
        assert [body for _, body, _ in got] == [payload(i) for i in range(MESSAGES)]
        # Published at QoS 1, it crossed NATS as QoS 1.
        assert {persistent for _, _, persistent in got} == {"true"}
    finally:
        pub.close()
        sub.close()


def test_amqp_at_n2_reaches_an_mqtt_subscriber_at_n1_once_each(cluster):
    """pika publishes persistent messages (QoS 1) to amq.topic with confirms; routing key
    words are topic levels, so `<base>.x.y` is the topic `<base>/x/y`."""
    _, (n1, n2, _) = cluster
    base = unique("a")
    sub = Client(n1.port("mqtt"), unique("sub"))
    sub.subscribe(f"{base}/#", qos=1)
    connection = pika.BlockingConnection(
        pika.ConnectionParameters(
            host="127.0.0.1",
            port=n2.port("amqp"),
            credentials=pika.PlainCredentials("guest", "guest"),
            blocked_connection_timeout=WAIT,
            socket_timeout=WAIT,
            stack_timeout=WAIT,
        )
    )
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        persistent = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)

        def send(topic, body):
            # With confirms on, this returns once tolk confirmed, and raises on a nack.
            channel.basic_publish("amq.topic", topic.replace("/", "."), body, persistent)

        await_interest(send, sub.inbox, f"{base}/probe")
        for i in range(MESSAGES):
            send(f"{base}/x/y", payload(i))
        got = take(sub.inbox, f"{base}/x/y", MESSAGES)
        assert got == [(f"{base}/x/y", payload(i)) for i in range(MESSAGES)]
    finally:
        connection.close()
        sub.close()


def test_a_retained_message_set_at_n1_reaches_a_later_subscriber_at_n3(cluster):
    _, (n1, _, n3) = cluster
    topic = f"{unique('r')}/state"
    retained = b"retained\x00" + bytes(range(256))
    pub = Client(n1.port("mqtt"), unique("pub"))
    acked(pub, topic, retained, retain=True)
    pub.close()
    # The retained store is shared through NATS; until it has crossed, a new subscriber at n3
    # gets nothing, so subscribe afresh until it does.
    deadline = time.monotonic() + WAIT
    for attempt in itertools.count():
        late = Client(n3.port("mqtt"), f"late{attempt}-{uuid.uuid4().hex[:6]}")
        late.client.on_message = lambda c, u, m, inbox=late.inbox: inbox.put((m.topic, m.payload, m.retain))
        late.subscribe(topic, qos=1)
        try:
            got = late.inbox.get(timeout=0.5)
            break
        except queue.Empty:
            assert time.monotonic() < deadline, f"the retained message on {topic} never reached n3"
        finally:
            late.close()
    assert got == (topic, retained, True)


def test_a_kill_of_the_nats_server_under_the_publisher_loses_no_acknowledged_message(cluster):
    """1,000 QoS 1 messages published at n1, at most 20 unacknowledged at a time, to a
    persistent subscriber at n2; NATS server 1 (n1's only one) gets SIGKILL at about the 300th
    and comes back after the stream. Every message n1 acknowledged must reach n2 (QoS 1 allows
    duplicates); and n1 must have noticed the outage: a degraded /healthz or state down seen
    while it lasted or, however short it was, a new connection to NATS since."""
    nats, (n1, n2, _) = cluster
    base = unique("k")
    total, kill_at, window = 1000, 300, 20
    sub = Client(n2.port("mqtt"), unique("durable"), clean=False)
    sub.subscribe(f"{base}/#", qos=1)
    pub = Client(n1.port("mqtt"), unique("pub"))

    seen, watching = set(), threading.Event()

    def watch():
        while not watching.is_set():
            try:
                if healthz(n1).startswith("degraded"):
                    seen.add("degraded")
                seen.add(status(n1)["state"])
            except requests.RequestException:
                pass
            watching.wait(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    try:
        await_interest(lambda t, p: acked(pub, t, p), sub.inbox, f"{base}/probe")
        # n1 starts on server 1, but may have moved to a server it learnt from it: kill the one
        # it is on ("nats<k> 127.0.0.1:<port>").
        under_n1 = int(status(n1)["server"].split()[0].removeprefix("nats")) - 1
        connects = status(n1)["connects"]
        watcher.start()
        infos = []
        for i in range(total):
            if i == kill_at:
                nats.kill9(under_n1)
                killed_at = time.monotonic()
            if i >= window:
                infos[i - window].wait_for_publish(WAIT)
            infos.append(pub.client.publish(f"{base}/data", payload(i), qos=1))
        for info in infos[-window:]:
            info.wait_for_publish(WAIT)
        acknowledged = {i for i, info in enumerate(infos) if info.is_published()}

        # n1 fails over to a server it learnt from server 1, which stays down meanwhile.
        wait_for("n1 up again with its spool sent", lambda: (s := status(n1))["state"] == "up" and s["spool_messages"] == 0)
        nats.start_server(under_n1)
        # Everything n1 acknowledged is in the stream now.
        wanted = {payload(i): i for i in range(total)}
        received = set()
        deadline = killed_at + FAILOVER
        while not acknowledged <= received and time.monotonic() < deadline:
            try:
                topic, body = sub.inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if topic == f"{base}/data":
                assert body in wanted, f"a payload that was never sent: {body[:40]!r}"
                received.add(wanted[body])
        lost = sorted(acknowledged - received)
        assert not lost, (
            f"{len(lost)} acknowledged messages did not reach n2 within {FAILOVER}s of the kill, "
            f"from {lost[:10]}; n1 {status(n1)}; n2 {status(n2)}"
        )
        assert len(acknowledged) == total, f"n1 acknowledged {len(acknowledged)} of {total}: not {sorted(set(range(total)) - acknowledged)[:10]}…"

        watching.set()
        watcher.join()
        after = status(n1)
        assert seen & {"degraded", "down"} or after["connects"] > connects, f"n1 never showed the outage: saw {seen}, then {after}"
        metrics = requests.get(f"http://127.0.0.1:{n1.port('http')}/metrics", timeout=5).text
        assert "\ntolk_cluster_up 1\n" in metrics and "\ntolk_cluster_spool_bytes 0\n" in metrics
    finally:
        watching.set()
        pub.close()
        sub.close()
        for i, process in enumerate(nats.processes):
            if process.poll() is not None:
                nats.start_server(i)


def test_while_nats_is_away_the_spool_holds_at_most_spool_max_bytes(tmp_path):
    """No NATS at all: at-least-once messages for the cluster wait in $cluster/out, within
    spool_max_bytes. Beyond it the MQTT 5 publisher is refused with PUBACK 0x97 (quota
    exceeded), counted as queue_full, and what was taken stays held."""
    dead = free_port()
    node = Broker(
        tmp_path,
        top='node_name = "alone"',
        extra=f'[cluster]\nnats_urls = ["nats://127.0.0.1:{dead}"]\nspool_max_bytes = 4096\n',
    )
    node.start()
    try:
        wait_for("the node degraded", lambda: healthz(node).startswith("degraded"))
        pub = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=unique("pub"), protocol=paho.MQTTv5)
        codes = queue.Queue()
        pub.on_publish = lambda c, u, mid, reason, props: codes.put((mid, reason.value))
        pub.connect("127.0.0.1", node.port("mqtt"))
        pub.loop_start()
        try:
            # Each message is charged its payload, topic and 384 bytes: two fit in 4,096.
            got = []
            for i in range(4):
                info = pub.publish(f"{unique('s')}/x", bytes(1000), qos=1)
                mid, code = codes.get(timeout=WAIT)
                assert mid == info.mid
                got.append(code)
            assert got == [0, 0, 0x97, 0x97], got
            held = status(node)
            assert (held["spool_messages"], held["state"]) == (2, "down"), held
            metrics = requests.get(f"http://127.0.0.1:{node.port('http')}/metrics", timeout=5).text
            assert 'reason="queue_full"} 2' in metrics, [l for l in metrics.splitlines() if "queue_full" in l]
        finally:
            pub.disconnect()
            pub.loop_stop()
    finally:
        node.stop()


def replica_views(nats):
    """Each NATS server's view of the replicas of the streams it holds a replica of."""
    views = []
    for i in range(nats.size):
        _, jsz = nats.monitor(i, "/jsz?streams=true&config=true")
        streams = {}
        for account in jsz.get("account_details", []):
            streams.update({st["name"]: st["config"]["num_replicas"] for st in account.get("stream_detail", [])})
        views.append(streams)
    return views


def agreed(views):
    """The replicas of each stream, as every server holding one of them reports it; `None` for a
    stream the servers disagree on (one has not applied a change yet)."""
    merged = {}
    for view in views:
        for stream, replicas in view.items():
            merged[stream] = replicas if merged.get(stream, replicas) == replicas else None
    return merged


def test_a_stream_made_with_fewer_replicas_is_scaled_up_to_the_cluster_size(tmp_path):
    """A node that made the stream and the bucket R1 (here by `replicas = 1`; in the field, by
    connecting before the NATS cluster had formed) leaves them R1; the next node that sees three
    servers scales both up to R3, so acknowledged messages survive a NATS server again."""
    nats = NatsCluster(tmp_path / "nats").start()
    try:
        for name, replicas in (("first", "replicas = 1\n"), ("second", "")):
            (tmp_path / name).mkdir()
            node = Broker(
                tmp_path / name,
                top=f'node_name = "{name}"',
                extra=f'[cluster]\nnats_urls = ["{nats.url(0)}"]\n{replicas}',
            )
            node.start()
            try:
                wait_for(f"{name} up in the cluster", lambda: status(node)["state"] == "up")
            finally:
                node.stop()
            want = {"TOLK": 1, "KV_tolk_retained": 1} if replicas else {"TOLK": 3, "KV_tolk_retained": 3}
            # The scale-up is acknowledged by the stream's leader; each server's monitor shows it
            # once that server has applied it, so every server's view is awaited.
            wait_for(f"{name}: every server sees {want}", lambda: agreed(replica_views(nats)) == want)
            views = replica_views(nats)
            assert agreed(views) == want, (name, views)
    finally:
        nats.stop()
