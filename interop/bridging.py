"""What the bridge tests share: a restartable Mosquitto and RabbitMQ on free loopback ports,
a paho client with an inbox, a tolk with one bridge, and /api/bridges."""

import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho
import requests

from conftest import Broker, free_port

WAIT = 20


class Mosquitto:
    """Debian's Mosquitto on one loopback port, restartable on the same port and with the same
    persistence file (saved when it stops)."""

    def __init__(self, workdir: Path, config=""):
        self.port = free_port()
        self.workdir = workdir
        self.conf = workdir / "mosquitto.conf"
        if "allow_anonymous" not in config:
            config = "allow_anonymous true\n" + config
        # user root: Mosquitto started as root would switch to its own user, which cannot read here.
        self.conf.write_text(
            f"user root\nlistener {self.port} 127.0.0.1\npersistence true\n"
            f"persistence_location {workdir}/\nmax_queued_messages 0\n{config}\n"
        )
        self.process = None

    def start(self):
        binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self.process = subprocess.Popen(
            [binary, "-c", str(self.conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for line in self.process.stdout:
            if line.rstrip().endswith(" running"):
                # Keep reading its output so that it never blocks on a full pipe.
                threading.Thread(target=lambda out=self.process.stdout: [None for _ in out], daemon=True).start()
                return self
        raise RuntimeError(f"mosquitto did not start with {self.conf}")

    def reload(self):
        self.process.send_signal(signal.SIGHUP)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


class Client:
    """A paho client whose messages arrive on a queue as (topic, payload)."""

    def __init__(self, port, client_id, clean=True, version=paho.MQTTv311):
        self.inbox = queue.Queue()
        self.client = paho.Client(
            paho.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version, clean_session=clean
        )
        self.connected = threading.Event()
        self.client.on_connect = lambda c, u, flags, reason, props: self.connected.set()
        self.client.on_message = lambda c, u, m: self.inbox.put((m.topic, m.payload))
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert self.connected.wait(WAIT), f"no CONNACK from port {port}"

    def subscribe(self, topic, qos=1):
        done = threading.Event()
        self.client.on_subscribe = lambda *args: done.set()
        self.client.subscribe(topic, qos)
        assert done.wait(WAIT), "no SUBACK"

    def publish(self, topic, payload, qos=1):
        self.client.publish(topic, payload, qos=qos).wait_for_publish(WAIT)

    def until(self, marker):
        """Everything that arrives before `marker`'s topic."""
        got = []
        while True:
            topic, payload = self.inbox.get(timeout=WAIT)
            if topic == marker:
                return got
            got.append((topic, payload))

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def bridges(tolk):
    r = requests.get(f"http://127.0.0.1:{tolk.port('http')}/api/bridges", timeout=5)
    r.raise_for_status()
    return {b["name"]: b for b in r.json()}


def wait_for(what, check):
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def refused_and_unaffected(tolk):
    """Waits until the bridge `up` reports the remote's refusal, and checks that the broker
    itself still routes."""
    wait_for("the refusal", lambda: "refused" in (bridges(tolk)["up"]["last_error"] or ""))
    assert bridges(tolk)["up"]["state"] == "down"
    near = Client(tolk.port("mqtt"), "near")
    near.subscribe("local")
    near.publish("local", b"still here")
    assert near.inbox.get(timeout=WAIT) == ("local", b"still here")
    near.close()


def one_copy_each_side(a, b, count):
    """Publishes `count` messages on data/a/… at tolk `a` and on data/b/… at `b`, and checks
    that each side's subscriber gets every one of them once, and nothing more after."""
    at_a, at_b = Client(a.port("mqtt"), "at-a"), Client(b.port("mqtt"), "at-b")
    at_a.subscribe("data/#")
    at_b.subscribe("data/#")
    for i in range(count):
        at_a.publish(f"data/a/{i}", f"from a {i}".encode())
        at_b.publish(f"data/b/{i}", bytes([i % 256, 0, 255]))
    at_a.publish("data/end-a", b"")
    at_b.publish("data/end-b", b"")
    expected = {(f"data/a/{i}", f"from a {i}".encode()) for i in range(count)}
    expected |= {(f"data/b/{i}", bytes([i % 256, 0, 255])) for i in range(count)}
    for side in (at_a, at_b):
        got = []
        while sum(1 for t, _ in got if t.startswith("data/end")) < 2:
            got.append(side.inbox.get(timeout=WAIT))
        data = [m for m in got if not m[0].startswith("data/end")]
        assert len(data) == 2 * count and set(data) == expected, sorted(data)
    # Nothing still going round: a last marker is the next thing either side sees.
    at_a.publish("data/last", b"")
    assert at_a.inbox.get(timeout=WAIT)[0] == "data/last"
    assert at_b.inbox.get(timeout=WAIT)[0] == "data/last"
    at_a.close()
    at_b.close()


def bridged_tolk(workdir, node, url, topics, settings="", kind="mqtt"):
    """A tolk named `node` with one bridge, `up`, of `kind` to `url`, retrying quickly."""
    rules = ", ".join(f'"{t}"' for t in topics)
    table = (
        f'[[bridge]]\nname = "up"\nkind = "{kind}"\nurl = "{url}"\ntopics = [{rules}]\n'
        f'reconnect_min = "100ms"\nreconnect_max = "1s"\n{settings}'
    )
    workdir.mkdir(exist_ok=True)
    tolk = Broker(workdir, top=f'node_name = "{node}"', extra=table)
    tolk.start()
    return tolk




RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class RabbitMQ:
    """Debian's RabbitMQ as a private node (its own name, ports, data and cookie in `workdir`),
    restartable on the same port with the same data; guest may log in over loopback."""

    def __init__(self, workdir: Path):
        self.dir = workdir / "rabbitmq"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port, self.dist = free_port(), free_port()
        self.name = f"tolktest{os.getpid()}x{self.port}@localhost"
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users = none\n"
            "log.console = false\nlog.file.level = warning\n"
        )
        (self.dir / "enabled_plugins").write_text("[].\n")
        self.process = None

    def env(self):
        d = self.dir
        return dict(
            os.environ,
            HOME=str(d),
            RABBITMQ_CONFIG_FILE=str(d / "rabbitmq.conf"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(d / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(d / "mnesia"),
            RABBITMQ_LOG_BASE=str(d / "log"),
            RABBITMQ_PID_FILE=str(d / "pid"),
            RABBITMQ_NODENAME=self.name,
            RABBITMQ_DIST_PORT=str(self.dist),
        )

    def start(self):
        d = self.dir
        env = self.env()
        log = open(d / "out.log", "a")
        self.process = subprocess.Popen([RABBITMQ_SERVER], stdout=log, stderr=log, env=env, start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"rabbitmq-server exited:\n{(d / 'out.log').read_text()}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"RabbitMQ did not open port {self.port}")

    def ctl(self, *args):
        """Runs `rabbitmqctl` against this node."""
        subprocess.run(
            [str(Path(RABBITMQ_SERVER).with_name("rabbitmqctl")), "-n", self.name, *args], env=self.env(), check=True, capture_output=True, timeout=60
        )

    def stop(self):
        """Stops the node (SIGTERM is a clean stop for the Erlang VM) and waits until it is gone."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(60)
