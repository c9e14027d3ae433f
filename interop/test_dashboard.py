"""The live dashboard (`/dashboard`, docs/dashboard.md) in a real browser: headless Chromium
(Debian's `chromium`, driven by puppeteer-core in interop/node/dashboard.mjs) shows the
latency matrix while third-party clients send over exactly two protocol pairs (paho-mqtt →
stomp.py, pika → paho-mqtt). Those two cells must show a rate and latencies; every other cell
must stay empty. Each test runs its own broker, so the suite's other traffic is not counted."""

import json
import os
import re
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import paho.mqtt.client as mqtt
import pika
import pytest
import requests
import stomp

from conftest import ROOT, Broker, StompInbox

TIMEOUT = 20
NODE_DIR = Path(__file__).resolve().parent / "node"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PASSWD = ROOT / "crates" / "auth" / "tests" / "fixtures" / "passwd"
PAGE_BUDGET = 150 * 1024


@pytest.fixture
def own_broker(tmp_path):
    b = Broker(tmp_path, disabled=("mqttsn",))
    b.start()
    yield b
    b.stop()
    assert b.process.returncode == 0, b.log.read_text()


def mqtt_client(broker, name):
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name)
    connected = threading.Event()
    client.on_connect = lambda *args: connected.set()
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()
    assert connected.wait(TIMEOUT), "no CONNACK"
    return client


def test_matrix_shows_exactly_the_pairs_with_traffic(own_broker):
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium (or set CHROMIUM)"
    assert shutil.which("node"), "node is missing"
    broker, word = own_broker, uuid.uuid4().hex[:8]

    # mqtt → stomp: a stomp.py subscriber on /topic/dash/<word>/a, fed by paho-mqtt.
    inbox = StompInbox()
    stomp_sub = stomp.Connection([(broker.host, broker.port("stomp"))])
    stomp_sub.set_listener("inbox", inbox)
    stomp_sub.connect(wait=True)
    stomp_sub.subscribe(f"/topic/dash/{word}/a", id="1", receipt="sub")
    assert inbox.receipts.get(timeout=TIMEOUT) == "sub"
    # amqp → mqtt: a paho-mqtt subscriber on dash/<word>/b, fed by pika through amq.topic.
    mqtt_sub = mqtt_client(broker, f"dash-sub-{word}")
    subscribed, received = threading.Event(), threading.Event()
    mqtt_sub.on_subscribe = lambda *args: subscribed.set()
    mqtt_sub.on_message = lambda *args: received.set()
    mqtt_sub.subscribe(f"dash/{word}/b", qos=0)
    assert subscribed.wait(TIMEOUT), "no SUBACK"
    publisher = mqtt_client(broker, f"dash-pub-{word}")

    stop, failures = threading.Event(), []

    def traffic():
        # Its own pika connection: pika's BlockingConnection belongs to one thread.
        try:
            amqp = pika.BlockingConnection(pika.ConnectionParameters(host=broker.host, port=broker.port("amqp")))
            channel = amqp.channel()
            # About 20 messages a second on each pair, until the browser has seen them: the
            # page's rates are per second, so the traffic must still flow when it looks. The
            # wait paces the sender; it synchronises nothing.
            while not stop.wait(0.05):
                publisher.publish(f"dash/{word}/a", b"to stomp")
                channel.basic_publish("amq.topic", f"dash.{word}.b", b"to mqtt")
            amqp.close()
        except Exception as e:  # noqa: BLE001 - reported by the test below
            failures.append(e)

    sender = threading.Thread(target=traffic, daemon=True)
    sender.start()
    try:
        browser = subprocess.run(
            ["node", "dashboard.mjs", f"http://{broker.host}:{broker.port('http')}/dashboard",
             str(TIMEOUT * 1000), "", "mqtt-stomp", "amqp-mqtt"],
            cwd=NODE_DIR, capture_output=True, text=True, timeout=TIMEOUT * 3,
            env=dict(os.environ, CHROMIUM=CHROMIUM),
        )
    finally:
        stop.set()
        sender.join(TIMEOUT)
        publisher.loop_stop()
        publisher.disconnect()
        mqtt_sub.loop_stop()
        mqtt_sub.disconnect()
        stomp_sub.disconnect()
    assert not failures, failures
    assert browser.returncode == 0, f"{browser.stderr}\n{browser.stdout}"
    cells = json.loads(browser.stdout.strip().splitlines()[-1])
    # The messages did arrive (what the cells count).
    assert inbox.messages.get(timeout=TIMEOUT).body == "to stomp"
    assert received.is_set()

    for pair in ("mqtt-stomp", "amqp-mqtt"):
        cell = cells[pair]
        assert not cell["empty"] and float(cell["rate"]) > 0 and float(cell["p99"]) > 0, (pair, cell)
        assert re.search(r"\d+(\.\d+)? (µs|ms|s)", cell["text"]), (pair, cell)
    # The six base protocols are always there; no other pair carried anything, so it is
    # empty: no "0 µs", no text at all.
    for pair in ("stomp-amqp", "mqtt-mqtt", "amqp-stomp", "wsn-mqttsn"):
        assert cells[pair] == {"rate": None, "p99": None, "text": "", "empty": True}, (pair, cells[pair])
    assert {pair for pair, cell in cells.items() if not cell["empty"]} == {"mqtt-stomp", "amqp-mqtt"}

    # The JSON twin of the events says the same.
    snapshot = requests.get(f"http://{broker.host}:{broker.port('http')}/api/dashboard", timeout=5).json()
    assert {(c["in"], c["out"]) for c in snapshot["cells"]} == {("mqtt", "stomp"), ("amqp", "mqtt")}
    assert snapshot["unit"] == "microseconds"


def test_dashboard_asks_for_credentials_and_stays_small(tmp_path):
    b = Broker(tmp_path, disabled=("mqttsn", "wsn"), extra=f'[auth]\npassword_file = "{PASSWD}"\n')
    b.config.write_text(b.config.read_text().replace("require_auth = false", "require_auth = true"))
    b.start()
    try:
        base = f"http://{b.host}:{b.port('http')}"
        for path in ("/dashboard", "/dashboard/app.js", "/api/dashboard", "/api/dashboard/events"):
            r = requests.get(base + path, timeout=5)
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"].startswith("Basic"), path
            r = requests.get(base + path, auth=("alice", "wrong"), timeout=5)
            assert r.status_code == 401, path
        assert requests.get(base + "/healthz", timeout=5).status_code == 200

        alice = ("alice", "wonder land")
        page = requests.get(base + "/dashboard", auth=alice, timeout=5)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        # Everything the page loads comes from the broker (the icon is an empty `data:` URL).
        assets = [a for a in re.findall(r'(?:src|href)="([^"]+)"', page.text) if a != "data:,"]
        assert sorted(assets) == ["dashboard/app.css", "dashboard/app.js"], assets
        size = len(page.content)
        for asset in assets:
            r = requests.get(f"{base}/{asset}", auth=alice, timeout=5)
            assert r.status_code == 200, asset
            assert "http://" not in r.text and "https://" not in r.text, f"{asset} loads from elsewhere"
            size += len(r.content)
        assert size < PAGE_BUDGET, f"the page is {size} bytes"

        with requests.get(base + "/api/dashboard/events", auth=alice, stream=True, timeout=5) as events:
            assert events.status_code == 200
            assert events.headers["content-type"] == "text/event-stream"
            lines = events.iter_lines(decode_unicode=True)
            data = next(line for line in lines if line.startswith("data: "))
            assert json.loads(data[len("data: "):])["protocols"][:2] == ["mqtt", "mqttsn"]
    finally:
        b.stop()
    assert b.process.returncode == 0, b.log.read_text()
