"""One access-control list for every protocol, with third-party clients. The broker reads the
password file made by Debian's `mosquitto_passwd` and an ACL in Mosquitto's syntax
(crates/auth/tests/fixtures/acl), both as they are; tolk's queue extension is appended to a
copy of the ACL. Mosquitto reads the same two files, and a deny inside a granted filter behaves
the same in both brokers.

alice: readwrite sensors/#, write cmd/#, readwrite queues orders.*
bob:   read sensors/# but not sensors/secret/#, write sensors/bob/#, read cmd/bob/#
MQTT-SN client id sn-bob logs in as bob."""

import queue
import signal
import subprocess
import threading
import time
import urllib.request

import paho.mqtt.client as mqtt
import pika
import pytest
import stomp
from mqttsn12.client.MqttSnClient import MqttSnListener
from mqttsn12.client.MqttSnClientException import MqttSnClientException
from test_mqttsn import Sub, api_client

from conftest import ROOT, Broker, StompInbox, mosquitto, mqtt_connect

FIXTURES = ROOT / "crates" / "auth" / "tests" / "fixtures"
PASSWD = FIXTURES / "passwd"
ACL = FIXTURES / "acl"
PASSWORDS = {"alice": "wonder land", "bob": "b0b!", "carol": "c@rol"}
QUEUE_RULES = "\n# tolk's extension: named queues.\nuser alice\nqueue readwrite orders.*\n"
TIMEOUT = 10


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tolk-acl")
    acl = workdir / "acl"
    acl.write_text(ACL.read_text() + QUEUE_RULES)
    b = Broker(
        workdir,
        disabled=("wsn",),
        extra=f'[auth]\npassword_file = "{PASSWD}"\nacl_file = "{acl}"\n\n'
        '[mqttsn.clients.sn-bob]\nuser = "bob"\n',
    )
    b.acl = acl
    b.start()
    yield b
    b.stop()
    assert b.process.returncode == 0, b.log.read_text()


class Mqtt:
    """A connected paho client that records SUBACK and PUBACK reason codes and messages."""

    def __init__(self, host, port, user, client_id, version=mqtt.MQTTv311):
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version)
        self.client.username_pw_set(user, PASSWORDS[user])
        self.subacks, self.pubacks, self.messages = queue.Queue(), queue.Queue(), queue.Queue()
        connected = threading.Event()
        self.client.on_connect = lambda c, u, f, rc, p: connected.set()
        self.client.on_subscribe = lambda c, u, mid, rcs, p: self.subacks.put([rc.value for rc in rcs])
        self.client.on_publish = lambda c, u, mid, rc, p: self.pubacks.put(rc.value)
        self.client.on_message = lambda c, u, m: self.messages.put((m.topic, m.payload))
        self.client.connect(host, port)
        self.client.loop_start()
        assert connected.wait(TIMEOUT), "no CONNACK"

    def subscribe(self, *filters):
        self.client.subscribe([(f, 1) for f in filters])
        return self.subacks.get(timeout=TIMEOUT)

    def publish(self, topic, payload, qos=1):
        self.client.publish(topic, payload, qos=qos)
        if qos:
            return self.pubacks.get(timeout=TIMEOUT)

    def next(self):
        return self.messages.get(timeout=TIMEOUT)

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


def mqtt_client(broker, user, client_id, version=mqtt.MQTTv311):
    return Mqtt(broker.host, broker.port("mqtt"), user, client_id, version)


def test_mqtt_subscriptions_outside_the_read_rules_are_refused(acl_broker):
    bob = mqtt_client(acl_broker, "bob", "acl-bob-3")
    try:
        # 3.1.1 has one failure code, 0x80; the deny rule refuses a filter wholly inside it.
        assert bob.subscribe("sensors/#", "cmd/alice", "#", "sensors/secret/#", "inbox/bob/x") == [1, 0x80, 0x80, 0x80, 1]
    finally:
        bob.close()
    bob5 = mqtt_client(acl_broker, "bob", "acl-bob-5", mqtt.MQTTv5)
    try:
        # MQTT 5: 0x87 Not authorized.
        assert bob5.subscribe("cmd/bob/+", "cmd/#") == [1, 0x87]
    finally:
        bob5.close()


def test_mqtt_publishes_outside_the_write_rules_are_refused(acl_broker):
    alice = mqtt_client(acl_broker, "alice", "acl-alice-reader")
    bob5 = mqtt_client(acl_broker, "bob", "acl-bob-pub5", mqtt.MQTTv5)
    bob3 = mqtt_client(acl_broker, "bob", "acl-bob-pub3")
    try:
        assert alice.subscribe("sensors/#") == [1]
        assert bob5.publish("sensors/room/t", b"no") == 0x87  # v5 PUBACK: Not authorized
        assert bob5.publish("sensors/bob/t", b"yes-5") == 0
        # 3.1.1 cannot refuse a publish: QoS 0 is dropped silently, QoS 1 acknowledged and dropped.
        bob3.publish("sensors/room/t", b"no", qos=0)
        assert bob3.publish("sensors/room/t", b"no") == 0
        assert bob3.publish("sensors/bob/t", b"yes-3") == 0
        assert alice.next() == ("sensors/bob/t", b"yes-5")
        assert alice.next() == ("sensors/bob/t", b"yes-3")
        assert alice.messages.empty()
    finally:
        for c in (alice, bob5, bob3):
            c.close()


def test_a_will_the_client_may_not_publish_refuses_the_connect(acl_broker):
    def connack(will_topic):
        return mqtt_connect(acl_broker, "bob", PASSWORDS["bob"], mqtt.MQTTv5, will_topic).value

    assert connack("cmd/alice") == 0x87  # Not authorized: the will could never be published
    assert connack("sensors/bob/state") == 0


def test_mosquitto_sub_with_u_and_p_is_denied_a_subscription(acl_broker):
    base = ["mosquitto_sub", "-h", acl_broker.host, "-p", str(acl_broker.port("mqtt")), "-V", "5", "-C", "1", "-W", "5"]
    denied = subprocess.run(base + ["-u", "bob", "-P", "b0b!", "-t", "cmd/alice"], capture_output=True, text=True, timeout=TIMEOUT)
    # mosquitto_sub reads the SUBACK's 0x87, says so, and ends (with status 0).
    assert denied.stderr == "All subscription requests were denied.\n", (denied.stdout, denied.stderr)


def test_pattern_rules_put_in_the_client_id(acl_broker):
    alice = mqtt_client(acl_broker, "alice", "dev-7")
    try:
        assert alice.subscribe("clients/dev-7/#", "clients/dev-8/#") == [1, 0x80]
    finally:
        alice.close()


def stomp_connect(broker, user):
    conn = stomp.Connection([(broker.host, broker.port("stomp"))])
    inbox = StompInbox()
    errors = queue.Queue()
    inbox.on_error = lambda frame: errors.put(frame.headers.get("message", ""))
    conn.set_listener("inbox", inbox)
    conn.connect(user, PASSWORDS[user], wait=True)
    return conn, inbox, errors


def test_stomp_denials_are_errors(acl_broker):
    conn, _, errors = stomp_connect(acl_broker, "bob")
    conn.subscribe("/topic/cmd/alice", id="1")
    assert "not authorized to subscribe to /topic/cmd/alice" in errors.get(timeout=TIMEOUT)
    conn, _, errors = stomp_connect(acl_broker, "bob")
    conn.send("/topic/sensors/room/t", b"no")
    assert "not authorized to send to /topic/sensors/room/t" in errors.get(timeout=TIMEOUT)
    conn, _, errors = stomp_connect(acl_broker, "bob")
    conn.send("/queue/orders.eu", b"no")
    assert "not authorized to send to /queue/orders.eu" in errors.get(timeout=TIMEOUT)


def pika_channel(broker, user):
    params = pika.ConnectionParameters(
        host=broker.host, port=broker.port("amqp"), credentials=pika.PlainCredentials(user, PASSWORDS[user])
    )
    connection = pika.BlockingConnection(params)
    return connection, connection.channel()


def test_amqp_denials_close_the_channel_with_403(acl_broker):
    connection, channel = pika_channel(acl_broker, "bob")
    try:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.queue_declare("orders.eu")
        assert refused.value.reply_code == 403 and "queue 'orders.eu'" in refused.value.reply_text
        channel = connection.channel()
        # A server-named exclusive queue needs no rule; what it reads does.
        mine = channel.queue_declare("", exclusive=True).method.queue
        channel.queue_bind(mine, "amq.topic", "sensors.#")
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.queue_bind(mine, "amq.topic", "cmd.#")
        assert refused.value.reply_code == 403
        channel = connection.channel()
        channel.confirm_delivery()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.basic_publish("amq.topic", "sensors.room.t", b"no")
        assert refused.value.reply_code == 403
    finally:
        connection.close()


def test_amqp_and_stomp_use_queues_their_queue_lines_grant(acl_broker):
    connection, channel = pika_channel(acl_broker, "alice")
    try:
        channel.queue_declare("orders.eu")
        channel.confirm_delivery()
        channel.basic_publish("", "orders.eu", b"order-1")
        conn, _, errors = stomp_connect(acl_broker, "alice")
        conn.send("/queue/orders.eu", b"order-2", receipt="r")
        method, _, body = channel.basic_get("orders.eu", auto_ack=True)
        assert body == b"order-1"
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.queue_delete("orders.eu")  # readwrite, not configure
        assert refused.value.reply_code == 403
        assert errors.empty()
        conn.disconnect()
    finally:
        connection.close()


def test_mqttsn_client_ids_map_to_users(acl_broker):
    stranger = api_client(acl_broker, "sn-stranger")
    try:
        # No password file user, and anonymous clients are not allowed.
        with pytest.raises(MqttSnClientException, match="not supported"):
            stranger.send_connect()
    finally:
        stranger.close()
    bob = api_client(acl_broker, "sn-bob")
    try:
        bob.send_connect()
        bob.send_subscribe("sensors/#", 1, MqttSnListener())
        with pytest.raises(MqttSnClientException, match="not supported"):
            bob.send_subscribe("cmd/alice", 1, MqttSnListener())
        bob.send_disconnect()
    finally:
        bob.close()


def test_an_acl_written_for_mqtt_topics_governs_stomp_amqp_and_mqttsn(acl_broker):
    """alice publishes over MQTT; bob reads over STOMP, AMQP and MQTT-SN, with the rules written
    for MQTT topics: the deny inside his read rule withholds the secret in every protocol."""
    conn, inbox, errors = stomp_connect(acl_broker, "bob")
    conn.subscribe("/topic/sensors/#", id="1", receipt="sub")
    assert inbox.receipts.get(timeout=TIMEOUT) == "sub"
    connection, channel = pika_channel(acl_broker, "bob")
    mine = channel.queue_declare("", exclusive=True).method.queue
    channel.queue_bind(mine, "amq.topic", "sensors.#")
    sn = Sub(acl_broker, "-i", "sn-bob", "-q", "1", "-t", "sensors/#").wait_subscribed()
    alice = mqtt_client(acl_broker, "alice", "acl-alice-cross")
    try:
        assert alice.publish("sensors/secret/key", b"k") == 0
        assert alice.publish("sensors/room1/temp", b"21.5") == 0
        frame = inbox.messages.get(timeout=TIMEOUT)
        assert (frame.headers["destination"], frame.body) == ("/topic/sensors/room1/temp", "21.5")
        deadline = time.monotonic() + TIMEOUT
        while (got := channel.basic_get(mine, auto_ack=True))[0] is None:
            assert time.monotonic() < deadline, "AMQP got nothing"
            connection.process_data_events(time_limit=0.1)
        assert (got[0].routing_key, got[2]) == ("sensors.room1.temp", b"21.5")
        assert sn.next() == "21.5"
        assert errors.empty()
    finally:
        alice.close()
        conn.disconnect()
        connection.close()
        sn.close()


def test_refusals_are_counted_in_metrics(acl_broker):
    text = urllib.request.urlopen(f"http://127.0.0.1:{acl_broker.port('http')}/metrics", timeout=TIMEOUT).read().decode()
    counts = {
        line.split("{")[1].split("}")[0]: int(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("tolk_acl_denied_total{")
    }
    assert counts['protocol="mqtt",operation="subscribe"'] > 0
    assert counts['protocol="stomp",operation="publish"'] > 0
    assert counts['protocol="amqp",operation="queue"'] > 0
    assert counts['protocol="stomp",operation="read"'] > 0  # bob's secret, withheld


def test_sighup_reloads_the_acl_for_connected_clients(acl_broker):
    bob = mqtt_client(acl_broker, "bob", "acl-bob-reload")
    try:
        assert bob.subscribe("cmd/alice") == [0x80]
        acl_broker.acl.write_text(ACL.read_text() + QUEUE_RULES + "user bob\ntopic read cmd/alice\n")
        mark = acl_broker.log.read_text().count("SIGHUP: reloaded")
        acl_broker.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + TIMEOUT
        while acl_broker.log.read_text().count("SIGHUP: reloaded") == mark:
            assert time.monotonic() < deadline, acl_broker.log.read_text()
            time.sleep(0.05)
        assert bob.subscribe("cmd/alice") == [1]
    finally:
        acl_broker.acl.write_text(ACL.read_text() + QUEUE_RULES)
        bob.close()


def test_mosquitto_reads_the_same_files_and_withholds_the_same_messages(tmp_path):
    with mosquitto(tmp_path, f"password_file {PASSWD}\nacl_file {ACL}") as port:
        bob = Mqtt("127.0.0.1", port, "bob", "m-bob")
        alice = Mqtt("127.0.0.1", port, "alice", "m-alice")
        try:
            assert bob.subscribe("sensors/#")[0] == 1
            assert alice.publish("sensors/secret/key", b"k") == 0
            assert alice.publish("sensors/room1/temp", b"21.5") == 0
            assert bob.next() == ("sensors/room1/temp", b"21.5")
        finally:
            bob.close()
            alice.close()


@pytest.fixture(scope="module")
def cert_broker(tmp_path_factory):
    """A broker whose TLS listeners require a client certificate and take the user name from
    its Common Name (`[tls] use_identity_as_username`, as Mosquitto's option)."""
    import trustme

    workdir = tmp_path_factory.mktemp("tolk-acl-certs")
    clients = trustme.CA()
    clients.cert_pem.write_to_path(str(workdir / "clients-ca.pem"))
    for user in ("alice", "bob"):
        leaf = clients.issue_cert(f"{user}.example", common_name=user)
        leaf.cert_chain_pems[0].write_to_path(str(workdir / f"{user}.pem"))
        leaf.private_key_pem.write_to_path(str(workdir / f"{user}-key.pem"))
    # Lines before the first table header continue conftest's [tls] table.
    b = Broker(
        workdir,
        disabled=("wsn", "mqttsn"),
        extra=f'ca_file = "{workdir / "clients-ca.pem"}"\nrequire_client_cert = true\nuse_identity_as_username = true\n'
        f'[auth]\npassword_file = "{PASSWD}"\nacl_file = "{ACL}"\n',
    )
    b.start()
    yield b
    b.stop()
    assert b.process.returncode == 0, b.log.read_text()


def test_a_client_certificate_names_the_user_whatever_it_sends(cert_broker):
    workdir = cert_broker.workdir
    subscriber = mqtt_client(cert_broker, "alice", "cert-reader")  # plain port, password login
    try:
        assert subscriber.subscribe("sensors/#") == [1]
        tls = ["--cafile", str(cert_broker.ca_file), "-h", "localhost", "-p", str(cert_broker.port("mqtt-tls"))]
        # alice's certificate: alice, though the user name and password sent are nonsense.
        as_alice = ["--cert", str(workdir / "alice.pem"), "--key", str(workdir / "alice-key.pem"), "-u", "mallory", "-P", "x"]
        sent = subprocess.run(
            ["mosquitto_pub", *tls, *as_alice, "-q", "1", "-t", "sensors/cert", "-m", "from alice's certificate"],
            capture_output=True, text=True, timeout=TIMEOUT,
        )
        assert sent.returncode == 0, sent.stderr
        assert subscriber.next() == ("sensors/cert", b"from alice's certificate")
        # bob's certificate: bob's rules.
        as_bob = ["--cert", str(workdir / "bob.pem"), "--key", str(workdir / "bob-key.pem")]
        denied = subprocess.run(
            ["mosquitto_sub", *tls, *as_bob, "-V", "5", "-t", "cmd/alice", "-C", "1", "-W", "5"],
            capture_output=True, text=True, timeout=TIMEOUT,
        )
        assert denied.stderr == "All subscription requests were denied.\n", denied.stderr
        # No certificate: no handshake.
        refused = subprocess.run(
            ["mosquitto_pub", *tls, "-u", "alice", "-P", PASSWORDS["alice"], "-t", "sensors/x", "-m", "m"],
            capture_output=True, text=True, timeout=TIMEOUT,
        )
        assert refused.returncode != 0
    finally:
        subscriber.close()
