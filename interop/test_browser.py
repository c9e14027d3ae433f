"""A real browser on the WebSocket endpoints: headless Chromium (Debian's `chromium`) runs
mqtt.js and @stomp/stompjs (interop/node/browser_ws.mjs, driven by puppeteer-core). A native
paho-mqtt client over TCP publishes to the browser; the browser answers over MQTT/WebSocket to
a native stomp.py subscriber and over STOMP/WebSocket to a native pika consumer."""

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import paho.mqtt.client as mqtt
import pika
import stomp

from conftest import StompInbox

TIMEOUT = 20
NODE_DIR = Path(__file__).resolve().parent / "node"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def test_a_browser_talks_to_native_clients_over_websocket(broker):
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium (or set CHROMIUM)"
    assert shutil.which("node"), "node is missing"
    word = uuid.uuid4().hex[:8]
    prefix = f"browser/{word}"
    payload = f"hello from a native client ✓ {word}"

    inbox = StompInbox()
    stomp_sub = stomp.Connection([(broker.host, broker.port("stomp"))])
    stomp_sub.set_listener("inbox", inbox)
    stomp_sub.connect(wait=True)
    stomp_sub.subscribe(f"/topic/{prefix}/out", id="1", receipt="sub")
    assert inbox.receipts.get(timeout=TIMEOUT) == "sub"
    amqp = pika.BlockingConnection(pika.ConnectionParameters(host=broker.host, port=broker.port("amqp")))
    channel = amqp.channel()
    amqp_queue = channel.queue_declare("", exclusive=True).method.queue
    channel.queue_bind(amqp_queue, "amq.topic", routing_key=f"browser.{word}.stomp-out")

    browser = subprocess.Popen(
        ["node", "browser_ws.mjs", broker.host, str(broker.port("http")), prefix],
        cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, CHROMIUM=CHROMIUM),
    )
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"native-{word}")
    try:
        assert browser.stdout.readline().strip() == "ready", browser.stderr.read()
        publisher.connect(broker.host, broker.port("mqtt"))
        publisher.loop_start()
        publisher.publish(f"{prefix}/in", payload.encode(), qos=1).wait_for_publish(TIMEOUT)
        assert browser.stdout.readline().strip() == f"done {payload}", browser.stderr.read()
        assert browser.wait(TIMEOUT) == 0, browser.stderr.read()

        frame = inbox.messages.get(timeout=TIMEOUT)
        assert frame.body == f"echo:{payload}"
        for method, _, body in channel.consume(amqp_queue, auto_ack=True, inactivity_timeout=TIMEOUT):
            assert method is not None, "the browser's STOMP message did not reach AMQP"
            assert body == payload.encode()
            break
    finally:
        if browser.poll() is None:
            browser.kill()
        publisher.loop_stop()
        publisher.disconnect()
        channel.cancel()
        amqp.close()
        stomp_sub.disconnect()
