"""MQTT and STOMP over WebSocket on the HTTP port with third-party clients: paho-mqtt's
websockets transport at /mqtt and stomp.py's WSStompConnection at /stomp, each exchanging
messages with a native client of another protocol, byte for byte."""

import queue
import socket
import uuid

import paho.mqtt.client as mqtt
import requests
import stomp

from conftest import StompInbox

TIMEOUT = 10


def ws_mqtt_client(broker, on_message=None):
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=f"ws-{uuid.uuid4().hex[:8]}", transport="websockets"
    )
    client.ws_set_options(path="/mqtt")
    if on_message:
        client.on_message = on_message
    client.connect(broker.host, broker.port("http"))
    client.loop_start()
    return client


def test_paho_over_websocket_reaches_a_native_stomp_subscriber(broker):
    topic = f"ws/{uuid.uuid4().hex[:8]}"
    inbox = StompInbox()
    sub = stomp.Connection([(broker.host, broker.port("stomp"))], auto_decode=False)
    sub.set_listener("inbox", inbox)
    sub.connect(wait=True)
    sub.subscribe(f"/topic/{topic}", id="1", receipt="sub")
    assert inbox.receipts.get(timeout=TIMEOUT) == "sub"
    pub = ws_mqtt_client(broker)
    try:
        payload = bytes(range(256))
        pub.publish(topic, payload, qos=1).wait_for_publish(TIMEOUT)
        frame = inbox.messages.get(timeout=TIMEOUT)
        assert frame.body == payload
        # The transport is in the latency labels: mqtt-ws → stomp, not mqtt → stomp.
        metrics = requests.get(f"http://{broker.host}:{broker.port('http')}/metrics", timeout=TIMEOUT).text
        assert 'tolk_hop_latency_seconds_count{hop="end_to_end",in="mqtt-ws",out="stomp"} ' in metrics
    finally:
        pub.loop_stop()
        pub.disconnect()
        sub.disconnect()


def test_stomp_py_over_websocket_reaches_a_paho_websocket_subscriber(broker):
    topic = f"ws/{uuid.uuid4().hex[:8]}"
    received, subscribed = queue.Queue(), queue.Queue()
    sub = ws_mqtt_client(broker, on_message=lambda c, u, m: received.put((m.topic, m.payload)))
    sub.on_subscribe = lambda c, u, mid, codes, props: subscribed.put(mid)
    _, mid = sub.subscribe(topic, qos=1)
    assert subscribed.get(timeout=TIMEOUT) == mid

    inbox = StompInbox()
    sender = stomp.WSStompConnection([(broker.host, broker.port("http"))], ws_path="/stomp")
    sender.set_listener("inbox", inbox)
    sender.connect(wait=True)
    try:
        sender.send(f"/topic/{topic}", "über websocket", receipt="sent")
        assert inbox.receipts.get(timeout=TIMEOUT) == "sent"
        assert received.get(timeout=TIMEOUT) == (topic, "über websocket".encode())
    finally:
        sender.disconnect()
        sub.loop_stop()
        sub.disconnect()


def test_the_websocket_answer_names_the_mqtt_subprotocol(broker):
    with socket.create_connection((broker.host, broker.port("http")), timeout=TIMEOUT) as s:
        s.sendall(
            b"GET /mqtt HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Protocol: mqttv3.1, mqtt\r\n\r\n"
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            assert chunk, answer
            answer += chunk
    head = answer.split(b"\r\n\r\n")[0].decode().lower()
    assert head.startswith("http/1.1 101"), head
    assert "sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=" in head, head
    assert "sec-websocket-protocol: mqtt" in head, head


def test_a_websocket_message_over_the_packet_limit_closes_only_that_connection(broker):
    """[mqtt] max_packet_size_bytes (1 MiB) bounds a WebSocket message at /mqtt too: a bigger
    one closes that connection, and the endpoint keeps serving others."""
    import websocket

    ws = websocket.create_connection(
        f"ws://{broker.host}:{broker.port('http')}/mqtt", subprotocols=["mqtt"], timeout=TIMEOUT
    )
    # The broker refuses the message as soon as its header is in, closes the connection and lingers
    # for at most 1 MiB of what follows: the rest of the 2 MiB may then meet a closed socket, so
    # the send itself can end with the connection reset. Either way this connection is over.
    try:
        ws.send_binary(b"\x30" + b"\x00" * (2 * 1024 * 1024))
        while True:
            frame = ws.recv_data(control_frame=True)
            if frame[0] == websocket.ABNF.OPCODE_CLOSE:
                break
    except (websocket.WebSocketConnectionClosedException, ConnectionError):
        pass
    ws.close()
    client = ws_mqtt_client(broker)
    try:
        client.publish("ws/after-the-big-one", b"x", qos=1).wait_for_publish(TIMEOUT)
    finally:
        client.loop_stop()
        client.disconnect()
