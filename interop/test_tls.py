"""TLS listeners with third-party clients: paho-mqtt, stomp.py and pika over TLS, each
checked by a message that crosses to a client of another protocol on a plain listener, and
a plain client on a TLS port closed without an answer."""

import socket
import ssl
import threading
import time
import uuid

import paho.mqtt.client as mqtt
import pika
import requests
import stomp

TIMEOUT = 10


def tls_context(broker):
    return ssl.create_default_context(cafile=str(broker.ca_file))


def mqtt_client(broker, tls):
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"tls-{uuid.uuid4().hex[:8]}")
    port = broker.port("mqtt")
    if tls:
        client.tls_set_context(tls_context(broker))
        port = broker.port("mqtt-tls")
    client.connect(broker.host, port)
    client.loop_start()
    return client


def test_paho_over_tls_reaches_a_plain_stomp_subscriber(broker):
    received, got, subscribed = [], threading.Event(), threading.Event()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):
            received.append(frame.body)
            got.set()

        def on_receipt(self, frame):
            subscribed.set()

    topic = f"tls/{uuid.uuid4().hex[:8]}"
    sub = stomp.Connection([(broker.host, broker.port("stomp"))])
    sub.set_listener("l", Listener())
    sub.connect(wait=True)
    sub.subscribe(f"/topic/{topic}", id="1", receipt="sub")
    assert subscribed.wait(TIMEOUT)
    pub = mqtt_client(broker, tls=True)
    try:
        pub.publish(topic, b"over tls", qos=1).wait_for_publish(TIMEOUT)
        assert got.wait(TIMEOUT)
        assert received == ["over tls"]
    finally:
        pub.loop_stop()
        pub.disconnect()
        sub.disconnect()


def test_stomp_py_over_tls_and_pika_over_tls(broker):
    """stomp.py sends over TLS; a pika consumer over TLS receives it byte for byte."""
    params = pika.ConnectionParameters(
        host=broker.host,
        port=broker.port("amqp-tls"),
        ssl_options=pika.SSLOptions(tls_context(broker), "localhost"),
    )
    connection = pika.BlockingConnection(params)
    channel = connection.channel()
    queue = channel.queue_declare("", exclusive=True).method.queue
    word = uuid.uuid4().hex[:8]
    channel.queue_bind(queue, "amq.topic", routing_key=f"tls.{word}")

    sender = stomp.Connection([(broker.host, broker.port("stomp-tls"))])
    sender.set_ssl(for_hosts=[(broker.host, broker.port("stomp-tls"))], ca_certs=str(broker.ca_file))
    sender.connect(wait=True)
    sender.send(f"/topic/tls/{word}", b"\x00\x01tls\xff", headers={"content-type": "application/octet-stream"})
    try:
        for method, _, body in channel.consume(queue, auto_ack=True, inactivity_timeout=TIMEOUT):
            assert method is not None, "nothing arrived over AMQP/TLS"
            assert body == b"\x00\x01tls\xff"
            break
    finally:
        channel.cancel()
        sender.disconnect()
        connection.close()


def test_a_plain_client_on_a_tls_port_is_closed(broker):
    with socket.create_connection((broker.host, broker.port("mqtt-tls")), timeout=TIMEOUT) as s:
        # An MQTT 3.1.1 CONNECT where a TLS ClientHello was due.
        s.sendall(bytes.fromhex("101000044d5154540402003c000474657374"))
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        # No CONNACK: at most a TLS alert record (content type 21), then the close.
        assert not answer or answer[0] == 21, answer
    # The socket closes as the handshake fails; the log line follows it.
    deadline = time.monotonic() + TIMEOUT
    while "TLS handshake failed" not in broker.log.read_text():
        assert time.monotonic() < deadline, "no log line for the failed handshake"
        time.sleep(0.02)


def test_an_untrusted_certificate_is_refused_by_the_client(broker):
    context = ssl.create_default_context()  # the system CAs, not the test CA
    with socket.create_connection((broker.host, broker.port("stomp-tls")), timeout=TIMEOUT) as raw:
        try:
            context.wrap_socket(raw, server_hostname="localhost")
        except ssl.SSLCertVerificationError:
            return
    raise AssertionError("the handshake succeeded with a CA the server certificate does not chain to")


def test_https_and_mqtt_over_wss(broker):
    """The HTTP port's TLS twin: /healthz over HTTPS, and paho-mqtt over wss at /mqtt
    reaching a plain MQTT subscriber."""
    health = requests.get(f"https://localhost:{broker.port('http-tls')}/healthz", verify=str(broker.ca_file), timeout=TIMEOUT)
    assert health.status_code == 200 and health.text == "ok\n"

    topic = f"wss/{uuid.uuid4().hex[:8]}"
    received, subscribed = threading.Event(), threading.Event()
    payloads = []
    sub = mqtt_client(broker, tls=False)
    sub.on_subscribe = lambda *args: subscribed.set()
    sub.on_message = lambda c, u, m: (payloads.append(m.payload), received.set())
    sub.subscribe(topic, qos=1)
    assert subscribed.wait(TIMEOUT)
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"wss-{uuid.uuid4().hex[:8]}", transport="websockets")
    pub.ws_set_options(path="/mqtt")
    pub.tls_set_context(tls_context(broker))
    pub.connect("localhost", broker.port("http-tls"))
    pub.loop_start()
    try:
        pub.publish(topic, b"over wss", qos=1).wait_for_publish(TIMEOUT)
        assert received.wait(TIMEOUT)
        assert payloads == [b"over wss"]
    finally:
        pub.loop_stop()
        pub.disconnect()
        sub.loop_stop()
        sub.disconnect()
