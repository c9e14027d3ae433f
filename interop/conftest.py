"""Fixtures for the interoperability suite: one real `tolk` broker per test session.

The broker's own `--print-default-config` is the template: every `bind = "host:port"` line
gets a free loopback port, so a new protocol section is picked up without touching this file.
"""

import contextlib
import os
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho
import pytest
import stomp
import trustme

ROOT = Path(__file__).resolve().parent.parent
BINARY = Path(os.environ.get("TOLK_BIN", ROOT / "target" / "debug" / "tolk"))


# Ports already handed out in this test run.
_given_ports = set()


def free_port(kind=socket.SOCK_STREAM):
    """A free loopback port, never one handed out before in this run: the kernel may give a
    just-released port again, and two listeners of one broker would then collide."""
    while True:
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given_ports:
            _given_ports.add(port)
            return port


class StompInbox(stomp.ConnectionListener):
    """A stomp.py listener that queues MESSAGE frames and RECEIPT ids for a test to take."""

    def __init__(self):
        self.messages, self.receipts = queue.Queue(), queue.Queue()

    def on_message(self, frame):
        self.messages.put(frame)

    def on_receipt(self, frame):
        self.receipts.put(frame.headers["receipt-id"])


# The TCP front ends that also get a TLS listener (`tls_bind`), and their port key.
TLS_SECTIONS = ("mqtt", "stomp", "amqp", "http")


class Broker:
    """A running broker: `port(section)` gives the port of a listener by its config section,
    `port("mqtt-tls")` that of its TLS listener; `ca_file` is the CA the TLS listeners' server
    certificate (for `localhost` and 127.0.0.1) chains to."""

    host = "127.0.0.1"

    def __init__(self, workdir: Path, disabled=(), extra="", top=""):
        """`disabled`: sections whose `enabled = true` becomes false; `extra`: TOML appended;
        `top`: top-level keys (such as `node_name`), put before the first table."""
        self.workdir = workdir
        self.ports = {}
        template = subprocess.run(
            [str(BINARY), "--print-default-config"], check=True, capture_output=True, text=True
        ).stdout
        lines, section = [top], ""
        for line in template.splitlines():
            header = re.match(r"^\[([^\]]+)\]", line)
            if header:
                section = header.group(1)
            if re.match(r'^bind = "', line):
                kind = socket.SOCK_DGRAM if section == "mqttsn" else socket.SOCK_STREAM
                port = free_port(kind)
                self.ports[section] = port
                line = f'bind = "127.0.0.1:{port}"'
                if section in TLS_SECTIONS:
                    tls_port = free_port()
                    self.ports[f"{section}-tls"] = tls_port
                    line += f'\ntls_bind = "127.0.0.1:{tls_port}"'
            if section in disabled and line == "enabled = true":
                line = "enabled = false"
            if line.startswith("data_dir = "):
                line = f'data_dir = "{workdir / "data"}"'
            lines.append(line)
        ca = trustme.CA()
        server = ca.issue_cert("localhost", "127.0.0.1")
        self.ca_file = workdir / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        server.cert_chain_pems[0].write_to_path(str(workdir / "server.pem"))
        server.private_key_pem.write_to_path(str(workdir / "server-key.pem"))
        lines += ["[tls]", f'cert_file = "{workdir / "server.pem"}"', f'key_file = "{workdir / "server-key.pem"}"']
        lines.append(extra)
        self.config = workdir / "tolk.toml"
        self.config.write_text("\n".join(lines) + "\n")
        self.log = workdir / "tolk.log"
        self.process = None

    def port(self, section):
        return self.ports[section]

    def start(self):
        log = open(self.log, "w")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        self.process = subprocess.Popen(
            [str(BINARY), "--config", str(self.config)], stdout=log, stderr=log, env=env
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if "tolk ready" in self.log.read_text():
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"tolk did not start:\n{self.log.read_text()}")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                raise


def mqtt_connect(broker, user, password, version=paho.MQTTv311, will_topic=None):
    """The CONNACK's reason as paho reports it (3.1.1 return codes are mapped to MQTT 5 names)."""
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"connect-{user}", protocol=version)
    if user is not None:
        client.username_pw_set(user, password)
    if will_topic is not None:
        client.will_set(will_topic, b"gone", qos=1)
    answered, codes = threading.Event(), []
    client.on_connect = lambda c, u, flags, reason, props: (codes.append(reason), answered.set())
    client.connect(broker.host, broker.port("mqtt"))
    client.loop_start()
    try:
        assert answered.wait(10), "no CONNACK"
        return codes[0]
    finally:
        client.loop_stop()
        client.disconnect()


@contextlib.contextmanager
def mosquitto(workdir: Path, config: str):
    """Debian's Mosquitto on a free loopback port with `config` lines added; yields the port
    once every listener is open."""
    port = free_port()
    conf = workdir / "mosquitto.conf"
    # user root: Mosquitto started as root would switch to its own user, which cannot read here.
    conf.write_text(f"user root\nlistener {port} 127.0.0.1\n{config}\n")
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    process = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in process.stdout:
            if line.rstrip().endswith(" running"):
                break
        else:
            raise RuntimeError(f"mosquitto did not start with {conf}")
        yield port
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    if not BINARY.exists():
        pytest.exit(f"{BINARY} is missing: build it with `cargo build -p tolk` first", returncode=2)
    b = Broker(tmp_path_factory.mktemp("tolk"))
    b.start()
    yield b
    b.stop()
    assert b.process.returncode == 0, f"tolk exited with {b.process.returncode}:\n{b.log.read_text()}"
