"""AMQP 0-9-1 interoperability: pika (blocking), aio-pika (asyncio) and the amqp-tools
command-line clients (librabbitmq) against tolk's AMQP listener, plus a raw socket for the
protocol-header check and paho-mqtt for the amq.topic bridge.

Every test uses its own queue names and routing keys, so tests do not see each other's
messages on the shared broker. Waits are bounded by TIMEOUT; nothing sleeps to synchronise.
"""

import asyncio
import shutil
import socket
import subprocess
import time
import uuid

import pika
import pytest

TIMEOUT = 5
BINARY = bytes(range(256)) + b"\x00end"


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def params(broker):
    return pika.ConnectionParameters(
        host=broker.host,
        port=broker.port("amqp"),
        credentials=pika.PlainCredentials("guest", "guest"),
        blocked_connection_timeout=TIMEOUT,
        socket_timeout=TIMEOUT,
        stack_timeout=TIMEOUT,
    )


@pytest.fixture
def channel(broker):
    connection = pika.BlockingConnection(params(broker))
    ch = connection.channel()
    yield ch
    if connection.is_open:
        connection.close()


def next_message(ch, queue, timeout=TIMEOUT, auto_ack=False):
    """The next (method, properties, body) from a consumer on `queue`, or fail."""
    for method, properties, body in ch.consume(queue, auto_ack=auto_ack, inactivity_timeout=timeout):
        assert method is not None, f"nothing arrived on {queue} within {timeout}s"
        return method, properties, body
    raise AssertionError("consumer ended")


def nothing_arrives(ch, queue, wait=0.3):
    for method, _properties, _body in ch.consume(queue, inactivity_timeout=wait):
        assert method is None, f"unexpected delivery {method}"
        return


def test_wrong_protocol_header_gets_the_amqp_header_back(broker):
    with socket.create_connection((broker.host, broker.port("amqp")), timeout=TIMEOUT) as s:
        s.sendall(b"HELLO WORLD\r\n")
        received = b""
        while True:
            chunk = s.recv(64)
            if not chunk:
                break
            received += chunk
    assert received == b"AMQP\x00\x00\x09\x01"


def test_pika_publish_consume_with_confirms_and_properties(channel):
    queue = unique("pika-confirm")
    channel.queue_declare(queue, auto_delete=False)
    channel.confirm_delivery()
    props = pika.BasicProperties(
        content_type="application/octet-stream",
        headers={"site": "north", "count": "3"},
        correlation_id="corr-1",
        message_id="msg-1",
        delivery_mode=pika.DeliveryMode.Persistent,
    )
    # With confirms on, basic_publish raises if the broker nacks or returns.
    channel.basic_publish("", queue, BINARY, props, mandatory=True)
    method, got, body = next_message(channel, queue)
    assert body == BINARY
    assert (method.exchange, method.routing_key, method.delivery_tag, method.redelivered) == ("", queue, 1, False)
    assert got.content_type == "application/octet-stream"
    assert got.headers == {"site": b"north", "count": b"3"} or got.headers == {"site": "north", "count": "3"}
    assert (got.correlation_id, got.message_id, got.delivery_mode) == ("corr-1", "msg-1", 2)
    channel.basic_ack(method.delivery_tag)
    channel.cancel()
    assert channel.queue_declare(queue, passive=True).method.message_count == 0
    channel.queue_delete(queue)


def test_pika_mandatory_publish_without_route_is_returned(channel):
    channel.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError) as returned:
        channel.basic_publish("", unique("nowhere"), b"x", mandatory=True)
    assert returned.value.messages[0].method.reply_code == 312


def test_pika_nack_when_queue_is_full(channel):
    queue = unique("pika-full")
    channel.queue_declare(queue, arguments={"x-max-length": 1})
    channel.confirm_delivery()
    channel.basic_publish("", queue, b"1")
    with pytest.raises(pika.exceptions.NackError):
        channel.basic_publish("", queue, b"2")
    channel.queue_delete(queue)


def test_pika_prefetch_holds_back_until_ack(channel):
    queue = unique("pika-prefetch")
    channel.queue_declare(queue)
    for i in range(4):
        channel.basic_publish("", queue, f"m{i}".encode())
    channel.basic_qos(prefetch_count=2)
    got = []
    for method, _props, body in channel.consume(queue, inactivity_timeout=0.3):
        if method is None:
            break
        got.append((method.delivery_tag, body))
    assert got == [(1, b"m0"), (2, b"m1")], "prefetch 2: only two unacknowledged deliveries"
    channel.basic_ack(1)
    method, _props, body = next_message(channel, queue)
    assert body == b"m2"
    channel.cancel()
    channel.queue_delete(queue)


def test_pika_nack_with_requeue_redelivers(channel):
    queue = unique("pika-nack")
    channel.queue_declare(queue)
    channel.basic_qos(prefetch_count=1)
    channel.basic_publish("", queue, b"again")
    method, _props, body = next_message(channel, queue)
    assert (body, method.redelivered) == (b"again", False)
    channel.basic_nack(method.delivery_tag, requeue=True)
    method, _props, body = next_message(channel, queue)
    assert (body, method.redelivered) == (b"again", True)
    channel.basic_reject(method.delivery_tag, requeue=False)
    nothing_arrives(channel, queue)
    channel.cancel()
    channel.queue_delete(queue)


def test_pika_basic_get_and_get_empty(channel):
    queue = unique("pika-get")
    channel.queue_declare(queue)
    assert channel.basic_get(queue) == (None, None, None)
    channel.basic_publish("", queue, b"first")
    channel.basic_publish("", queue, b"second")
    method, _props, body = channel.basic_get(queue)
    assert (body, method.message_count) == (b"first", 1)
    channel.basic_ack(method.delivery_tag)
    method, _props, body = channel.basic_get(queue, auto_ack=True)
    assert body == b"second"
    assert channel.basic_get(queue) == (None, None, None)
    channel.queue_delete(queue)


def test_pika_server_named_queue_and_topic_wildcards(channel):
    prefix = unique("pika").replace("-", "_")
    declared = channel.queue_declare("", exclusive=True)
    queue = declared.method.queue
    assert queue.startswith("amq.gen-")
    channel.queue_bind(queue, "amq.topic", f"{prefix}.*.temp")
    channel.confirm_delivery()
    # A '.' inside a topic level travels as '/' in the routing key (sensors/room.1 <-> sensors.room/1).
    channel.basic_publish("amq.topic", f"{prefix}.room/1.temp", b"21.5", mandatory=True)
    with pytest.raises(pika.exceptions.UnroutableError):
        channel.basic_publish("amq.topic", f"{prefix}.room.1.temp", b"no", mandatory=True)
    method, _props, body = next_message(channel, queue, auto_ack=True)
    assert (method.exchange, method.routing_key, body) == ("amq.topic", f"{prefix}.room/1.temp", b"21.5")


def test_aio_pika_confirms_consume_and_topic_exchange(broker):
    import aio_pika

    async def scenario():
        connection = await aio_pika.connect(host=broker.host, port=broker.port("amqp"), login="guest", password="guest", timeout=TIMEOUT)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await channel.set_qos(prefetch_count=10)
            queue = await channel.declare_queue(exclusive=True)
            assert queue.name.startswith("amq.gen-")
            topic = await channel.get_exchange("amq.topic")
            key = unique("aio").replace("-", "_")
            await queue.bind(topic, routing_key=f"{key}.#")
            message = aio_pika.Message(BINARY, content_type="application/octet-stream", headers={"h": "v"}, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            await topic.publish(message, routing_key=f"{key}.a.b", mandatory=True)
            direct = await channel.declare_queue(unique("aio-direct"), auto_delete=True)
            await channel.default_exchange.publish(aio_pika.Message(b"direct"), routing_key=direct.name)
            async with queue.iterator() as it:
                incoming = await asyncio.wait_for(it.__anext__(), TIMEOUT)
                assert incoming.body == BINARY
                assert (incoming.routing_key, incoming.exchange) == (f"{key}.a.b", "amq.topic")
                assert incoming.headers.get("h") in ("v", b"v")
                await incoming.ack()
            incoming = await direct.get(timeout=TIMEOUT)
            assert incoming.body == b"direct"
            await incoming.nack(requeue=True)
            again = await direct.get(timeout=TIMEOUT)
            assert (again.body, again.redelivered) == (b"direct", True)
            await again.ack()

    asyncio.run(asyncio.wait_for(scenario(), 4 * TIMEOUT))


def tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (Debian amqp-tools) is not installed")
    return path


def tool_url(broker):
    return f"amqp://guest:guest@{broker.host}:{broker.port('amqp')}/%2f"


def test_amqp_tools_publish_get_and_consume(broker, channel):
    url = tool_url(broker)
    queue = unique("tools")
    channel.queue_declare(queue)
    subprocess.run([tool("amqp-publish"), "-u", url, "-r", queue, "-p", "-C", "text/plain", "-b", "from amqp-publish"], check=True, timeout=TIMEOUT)
    got = subprocess.run([tool("amqp-get"), "-u", url, "-q", queue], check=True, timeout=TIMEOUT, capture_output=True)
    assert got.stdout == b"from amqp-publish"

    # amqp-consume declares a server-named queue bound with a wildcard key; wait until the
    # binding routes (a mandatory publish is no longer returned), then read what it printed.
    key = unique("tools").replace("-", "_")
    consumer = subprocess.Popen(
        [tool("amqp-consume"), "-u", url, "-e", "amq.topic", "-r", f"{key}.#", "-c", "1", "cat"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        channel.confirm_delivery()
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                channel.basic_publish("amq.topic", f"{key}.x.y", b"to amqp-consume", mandatory=True)
                break
            except pika.exceptions.UnroutableError:
                assert time.monotonic() < deadline, "amqp-consume never bound its queue"
                channel.connection.process_data_events(time_limit=0.05)
        out, err = consumer.communicate(timeout=TIMEOUT)
        assert consumer.returncode == 0, err
        assert out == b"to amqp-consume"
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    channel.queue_delete(queue)


def test_mqtt_publisher_reaches_an_amqp_wildcard_binding(broker, channel):
    if "mqtt" not in getattr(broker, "ports", {"mqtt": None}):
        pytest.skip("no MQTT listener in this broker")
    import paho.mqtt.client as mqtt

    prefix = unique("bridge").replace("-", "_")
    queue = channel.queue_declare("", exclusive=True).method.queue
    channel.queue_bind(queue, "amq.topic", f"{prefix}.*.temp")
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=unique("amqp-bridge"))
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()
    try:
        client.publish(f"{prefix}/room.1/temp", BINARY, qos=1).wait_for_publish(TIMEOUT)
        method, props, body = next_message(channel, queue, auto_ack=True)
        assert body == BINARY
        assert (method.exchange, method.routing_key) == ("amq.topic", f"{prefix}.room/1.temp")
        assert props.delivery_mode == 2
    finally:
        client.loop_stop()
        client.disconnect()
