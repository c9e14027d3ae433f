"""The AMQP bridge against a real RabbitMQ (Debian's rabbitmq-server, a private node on free
loopback ports), checked with pika on RabbitMQ's side and paho on tolk's, byte for byte."""

import pika
import pytest

from bridging import WAIT, Client, RabbitMQ, bridged_tolk, bridges, refused_and_unaffected, wait_for


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory):
    node = RabbitMQ(tmp_path_factory.mktemp("rabbit")).start()
    yield node
    node.stop()


class Far:
    """A pika connection to RabbitMQ with one durable queue bound to amq.topic."""

    def __init__(self, rabbit, queue, keys):
        self.connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", rabbit.port))
        self.channel = self.connection.channel()
        self.queue = queue
        self.channel.queue_declare(queue, durable=True)
        for key in keys:
            self.channel.queue_bind(queue, "amq.topic", key)

    def until(self, marker_key):
        """(routing key, properties, body) of everything before `marker_key`, acked."""
        got = []
        for method, properties, body in self.channel.consume(self.queue, inactivity_timeout=WAIT):
            assert method is not None, f"nothing more arrived; got {len(got)} before"
            self.channel.basic_ack(method.delivery_tag)
            if method.routing_key == marker_key:
                self.channel.cancel()
                return got
            got.append((method.routing_key, properties, body))

    def publish(self, key, body, persistent=True):
        properties = pika.BasicProperties(delivery_mode=2 if persistent else 1)
        self.channel.basic_publish("amq.topic", key, body, properties)

    def close(self):
        self.connection.close()


def url(rabbit, user="guest", password="guest"):
    return f"amqp://{user}:{password}@127.0.0.1:{rabbit.port}/%2f"


def test_messages_cross_to_and_from_rabbitmq_once_each(rabbit, tmp_path):
    far = Far(rabbit, "far-cross", ["sensors.#"])
    tolk = bridged_tolk(tmp_path, "gw1", url(rabbit), ["sensors/# out 1", "cmd/# in 1"], kind="amqp")
    try:
        wait_for("the bridge up", lambda: bridges(tolk)["up"]["state"] == "up")
        near = Client(tolk.port("mqtt"), "near")
        near.subscribe("cmd/#")
        for i in range(100):
            near.publish(f"sensors/room.{i}", f"reading {i}".encode())
        near.publish("sensors/end", b"")
        got = far.until("sensors.end")
        # The AMQP front end's mapping: '/' and '.' swap places in the routing key.
        assert [(key, body) for key, _, body in got] == [
            (f"sensors.room/{i}", f"reading {i}".encode()) for i in range(100)
        ]
        for _, properties, _ in got:
            assert properties.delivery_mode == 2, "at least once: persistent at RabbitMQ"
            assert properties.headers["tolk-path"] == "gw1"

        for i in range(100):
            far.publish(f"cmd.valve/{i}", bytes([i, 0, 255]))
        far.publish("cmd.end", b"")
        assert near.until("cmd/end") == [(f"cmd/valve.{i}", bytes([i, 0, 255])) for i in range(100)]
        wait_for(
            "both counts",
            lambda: (bridges(tolk)["up"]["messages_out"], bridges(tolk)["up"]["messages_in"]) == (101, 101),
        )
        near.close()
    finally:
        far.close()
        tolk.stop()


def test_both_ways_on_every_topic_delivers_one_copy(rabbit, tmp_path):
    far = Far(rabbit, "far-loop", ["#"])
    tolk = bridged_tolk(tmp_path, "gw1", url(rabbit), ["# both 1"], kind="amqp")
    try:
        wait_for("the bridge up", lambda: bridges(tolk)["up"]["state"] == "up")
        near = Client(tolk.port("mqtt"), "near")
        near.subscribe("#")
        for i in range(20):
            near.publish(f"here/{i}", b"from tolk")
            far.publish(f"there.{i}", b"from rabbit")
        near.publish("end", b"")
        far.publish("end2", b"")
        got = []
        while sum(1 for t, _ in got if t.startswith("end")) < 2:
            got.append(near.inbox.get(timeout=WAIT))
        data = sorted(t for t, _ in got if not t.startswith("end"))
        assert data == sorted([f"here/{i}" for i in range(20)] + [f"there/{i}" for i in range(20)])
        # What tolk sent came back through its own binding (AMQP has no No Local) and was
        # dropped as a loop: a last marker is the next thing either side sees.
        near.publish("last", b"")
        assert near.inbox.get(timeout=WAIT)[0] == "last"
        at_far = far.until("last")
        assert sorted(k for k, _, _ in at_far if not k.startswith("end")) == sorted(
            [f"here.{i}" for i in range(20)] + [f"there.{i}" for i in range(20)]
        )
        near.close()
    finally:
        far.close()
        tolk.stop()


def test_a_refused_login_is_logged_and_retried(rabbit, tmp_path):
    # A user RabbitMQ does not know yet.
    tolk = bridged_tolk(tmp_path, "gw1", url(rabbit, "bridge", "secret"), ["a/# out 1"], kind="amqp")
    try:
        refused_and_unaffected(tolk)
        # Once the user exists, a later attempt gets in.
        rabbit.ctl("add_user", "bridge", "secret")
        rabbit.ctl("set_permissions", "-p", "/", "bridge", ".*", ".*", ".*")
        wait_for("the bridge up after a retry", lambda: bridges(tolk)["up"]["state"] == "up")
        log = tolk.log.read_text()
        # One line per reason, not one per attempt (a second reason may show between the two
        # rabbitmqctl commands: the user exists, its permissions not yet).
        assert log.count("ACCESS_REFUSED - Login was refused") == 1, log
        assert "bridge up" in log and "secret" not in log, "no password in the log"
    finally:
        tolk.stop()


def test_an_outage_of_rabbitmq_loses_no_qos1_message(rabbit, tmp_path):
    far = Far(rabbit, "far-outage", ["sensors.#"])
    far.close()
    tolk = bridged_tolk(tmp_path, "gw1", url(rabbit), ["sensors/# out 1"], kind="amqp")
    try:
        wait_for("the bridge up", lambda: bridges(tolk)["up"]["state"] == "up")
        rabbit.stop()
        wait_for("the bridge down", lambda: bridges(tolk)["up"]["state"] == "down")
        near = Client(tolk.port("mqtt"), "near")
        for i in range(50):
            near.publish(f"sensors/{i}", f"kept {i}".encode())
        assert bridges(tolk)["up"]["spool_messages"] == 50
        rabbit.start()
        wait_for("the spool drained", lambda: bridges(tolk)["up"]["spool_messages"] == 0)
        near.publish("sensors/end", b"")
        far = Far(rabbit, "far-outage", [])
        got = far.until("sensors.end")
        assert [(k, b) for k, _, b in got] == [(f"sensors.{i}", f"kept {i}".encode()) for i in range(50)]
        far.close()
        near.close()
    finally:
        tolk.stop()
