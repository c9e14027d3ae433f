#!/usr/bin/env python3
"""Smoke test of one tolk binary, native or emulated (qemu-user), on free loopback ports.

Always: `--version`, `--print-default-config`, `--check-config` on a config made from that
template, start-up until systemd's READY=1 arrives on a NOTIFY_SOCKET (what `Type=notify`
waits for), `GET /healthz`, `GET /metrics` and `GET /api/latency` with curl, the idle RSS of
the process, and a SIGTERM that must end it with status 0 (and STOPPING=1).
Additionally, when the template has both `[mqtt]` and `[stomp]` sections: one message from
`mosquitto_pub` (QoS 1) to a raw-socket STOMP subscriber (stomp_sub.py), body compared byte
for byte.

    smoke.py --name aarch64 --runner "qemu-aarch64 -L /usr/aarch64-linux-gnu" target/aarch64-unknown-linux-gnu/release/tolk
    smoke.py --name native target/release/tolk

Only the standard library, curl and (for MQTT) mosquitto_pub are needed.
"""

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stomp_sub  # noqa: E402

START_TIMEOUT = 60.0  # emulated start-up is slow, but not that slow
STOP_TIMEOUT = 30.0


class SmokeFailure(Exception):
    pass


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_config(template: str, data_dir: Path):
    """The template with every `bind = "host:port"` on a free loopback port (UDP for
    MQTT-SN), data_dir in the work directory, and the MQTT and STOMP front ends enabled.
    The same rule as interop/conftest.py, so a new section needs no change here."""
    lines, section, ports, sections = [], "", {}, set()
    for line in template.splitlines():
        header = re.match(r"^\s*\[([^\]]+)\]", line)
        if header:
            section = header.group(1).strip()
            sections.add(section)
        if re.match(r'^\s*bind\s*=\s*"', line):
            kind = socket.SOCK_DGRAM if section.split(".")[0] == "mqttsn" else socket.SOCK_STREAM
            port = free_port(kind)
            ports.setdefault(section, port)
            line = f'bind = "127.0.0.1:{port}"'
        elif re.match(r"^\s*data_dir\s*=", line) and section == "":
            line = f"data_dir = {json.dumps(str(data_dir))}"
        elif section in ("mqtt", "stomp") and re.match(r"^\s*enabled\s*=\s*false", line):
            line = "enabled = true"
        lines.append(line)
    return "\n".join(lines) + "\n", ports, sections


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, timeout=120, **kw)


def curl(url: str) -> bytes:
    r = run(["curl", "-fsS", "--max-time", "20", url])
    if r.returncode != 0:
        raise SmokeFailure(f"curl {url}: exit {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r.stdout


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


class Notify:
    """A NOTIFY_SOCKET, as systemd gives a Type=notify service: datagrams of KEY=VALUE lines."""

    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.seen = []

    def wait_for(self, key_value: str, timeout: float, alive=lambda: True) -> bool:
        deadline = time.monotonic() + timeout
        while key_value not in self.seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not alive():
                return False
            self.sock.settimeout(min(remaining, 0.2))
            try:
                self.seen += self.sock.recv(4096).decode(errors="replace").split("\n")
            except socket.timeout:
                pass
        return True


def smoke(name: str, runner: list, binary: Path, workdir: Path, summary: dict):
    cmd = runner + [str(binary)]
    version = run(cmd + ["--version"])
    if version.returncode != 0:
        raise SmokeFailure(f"--version failed: {version.stderr.decode(errors='replace')}")
    summary["version"] = version.stdout.decode().strip()
    template = run(cmd + ["--print-default-config"]).stdout.decode()
    text, ports, sections = make_config(template, workdir / "data")
    config = workdir / "tolk.toml"
    config.write_text(text)
    check = run(cmd + ["--config", str(config), "--check-config"])
    if check.returncode != 0:
        raise SmokeFailure(f"--check-config failed: {check.stdout!r} {check.stderr!r}")
    if "http" not in ports:
        raise SmokeFailure("the default config has no [http] bind")

    notify = Notify(workdir / "notify.sock")
    log_path = workdir / "tolk.log"
    env = dict(os.environ, NOTIFY_SOCKET=str(notify.path), RUST_LOG="info")
    env.pop("LISTEN_FDS", None)
    with open(log_path, "wb") as log:
        started = time.monotonic()
        proc = subprocess.Popen(cmd + ["--config", str(config)], stdout=log, stderr=log, env=env)
    try:
        if not notify.wait_for("READY=1", START_TIMEOUT, alive=lambda: proc.poll() is None):
            raise SmokeFailure(f"no READY=1 within {START_TIMEOUT}s (exit {proc.poll()}):\n{log_path.read_text()}")
        summary["ready_s"] = round(time.monotonic() - started, 2)
        base = f"http://127.0.0.1:{ports['http']}"
        if curl(base + "/healthz").strip() != b"ok":
            raise SmokeFailure("/healthz did not say ok")
        metrics = curl(base + "/metrics").decode()
        if not re.search(r"^# TYPE tolk_\w+ ", metrics, re.M):
            raise SmokeFailure(f"/metrics has no tolk_ metric:\n{metrics[:1000]}")
        latency = json.loads(curl(base + "/api/latency"))
        if "rows" not in latency:
            raise SmokeFailure(f"/api/latency has no rows: {latency}")
        time.sleep(1.0)  # let start-up allocations settle before reading the idle RSS
        summary["idle_rss_kib"] = status_kib(proc.pid, "VmRSS")
        summary["checks"] = ["start-up (READY=1)", "/healthz", "/metrics", "/api/latency"]

        if "mqtt" in sections and "stomp" in sections:
            mqtt_to_stomp(name, ports, base, workdir, summary)
        else:
            summary["mqtt_to_stomp"] = "skipped: no [mqtt] and [stomp] in --print-default-config yet"
        summary["peak_rss_kib"] = status_kib(proc.pid, "VmHWM")

        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise SmokeFailure(f"still running {STOP_TIMEOUT}s after SIGTERM:\n{log_path.read_text()}")
        if code != 0:
            raise SmokeFailure(f"exit status {code} after SIGTERM:\n{log_path.read_text()}")
        summary["stopping_notified"] = notify.wait_for("STOPPING=1", 1.0)
        summary["checks"].append("SIGTERM -> exit 0")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def mqtt_to_stomp(name: str, ports: dict, base: str, workdir: Path, summary: dict):
    topic = f"tolk-smoke/{name}/{os.getpid()}"
    # Text, multi-byte UTF-8 and every byte value but NUL: the body must arrive unchanged.
    payload = "tolk smoke ✓ ".encode() + bytes(range(1, 256))
    payload_file = workdir / "payload.bin"
    payload_file.write_bytes(payload)
    subscribed = threading.Event()
    result = {}

    def subscriber():
        try:
            result["body"] = stomp_sub.subscribe_and_receive(
                "127.0.0.1", ports["stomp"], topic, payload, 60.0, subscribed.set)
        except (stomp_sub.StompError, OSError) as e:
            result["error"] = e
            subscribed.set()

    thread = threading.Thread(target=subscriber, daemon=True)
    thread.start()
    subscribed.wait(60.0)
    if "error" in result:
        raise SmokeFailure(f"STOMP subscriber: {result['error']}")
    pub = run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(ports["mqtt"]), "-V", "mqttv311",
               "-i", f"smoke-{name}", "-q", "1", "-t", topic, "-f", str(payload_file)])
    if pub.returncode != 0:
        raise SmokeFailure(f"mosquitto_pub: exit {pub.returncode}: {pub.stderr.decode(errors='replace')}")
    thread.join(60.0)
    if "error" in result or "body" not in result:
        raise SmokeFailure(f"STOMP subscriber: {result.get('error', 'no MESSAGE')}")
    if result["body"] != payload:
        raise SmokeFailure(f"body differs: got {result['body'][:80]!r}…, sent {payload[:80]!r}…")
    summary["mqtt_to_stomp"] = f"passed ({len(payload)} bytes identical)"
    metrics = curl(base + "/metrics").decode()
    pair = re.compile(r'^tolk_hop_latency_seconds_count\{[^}]*hop="end_to_end"[^}]*in="mqtt"[^}]*out="stomp"', re.M)
    if not pair.search(metrics) and "in=\"mqtt\"" not in metrics:
        print(f"[{name}] warning: no tolk_hop_latency_seconds series for in=mqtt out=stomp", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", type=Path)
    parser.add_argument("--name", required=True, help="label for the output (aarch64, armv7, native)")
    parser.add_argument("--runner", default="", help='emulator prefix, e.g. "qemu-arm -L /usr/arm-linux-gnueabihf"')
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()
    summary = {"name": args.name, "runner": args.runner or "native", "binary_bytes": args.binary.stat().st_size}
    with tempfile.TemporaryDirectory(prefix=f"tolk-smoke-{args.name}-") as tmp:
        try:
            smoke(args.name, shlex.split(args.runner), args.binary, Path(tmp), summary)
        except (SmokeFailure, subprocess.TimeoutExpired, OSError, ValueError) as e:
            print(f"[{args.name}] SMOKE TEST FAILED: {e}", file=sys.stderr, flush=True)
            return 1
    print(f"[{args.name}] smoke test passed: {json.dumps(summary)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
