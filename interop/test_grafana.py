"""deploy/grafana/tolk.json and deploy/prometheus/alerts.yml against what tolk really exposes.

A tolk with a bridge and a cluster (both to remotes that are not there, so their families are
on /metrics) carries a message over two protocol pairs, so the latency histogram has series.
Then every query of the dashboard (panel targets and template variables) and every alert
expression must name only metrics that /metrics exposes, group and match only by labels those
metrics carry (or `instance`/`job`, which Prometheus adds at scrape time), and compare labels
only with values that occur. Renaming a metric or a label in the broker, or misspelling one in
the dashboard, fails here.

The queries are read with regular expressions, not a PromQL parser: names are identifiers that
start with `tolk_` outside string literals; aggregations must be written `sum by (…) (…)`
(prefix form) so that the expression they group is the parenthesis that follows.
"""

import json
import queue
import re
import shutil
import subprocess
import threading
import time
from collections import defaultdict

import paho.mqtt.client as paho
import pytest
import requests
import stomp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conftest import ROOT, Broker, StompInbox, free_port

DASHBOARD = ROOT / "deploy" / "grafana" / "tolk.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
WAIT = 20

# Labels a scrape adds to every series; they are not on /metrics.
TARGET_LABELS = {"instance", "job"}
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
NAME = re.compile(r"\btolk_[A-Za-z0-9_]*")
SELECTOR = re.compile(r"\b(tolk_[A-Za-z0-9_]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(by|without)\s*\(([^)]*)\)\s*\(")
VECTOR_MATCHING = re.compile(r"\b(on|ignoring)\s*\(([^)]*)\)")
POSTFIX_GROUPING = re.compile(r"\)\s*(by|without)\s*\(")
LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$", re.S)
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


class Exposition:
    """What one /metrics text exposes: each sample name (`tolk_messages_in_total`,
    `tolk_hop_latency_seconds_bucket`) with its label names and values, and the histogram
    families (with or without samples yet)."""

    def __init__(self, text):
        self.values = defaultdict(lambda: defaultdict(set))
        self.histograms = set()
        for family in text_string_to_metric_families(text):
            if family.type == "histogram":
                self.histograms.add(family.name)
            for sample in family.samples:
                labels = self.values[sample.name]
                for key, value in sample.labels.items():
                    labels[key].add(value)

    def has(self, name):
        if name in self.values:
            return True
        base = next((name[: -len(s)] for s in HISTOGRAM_SUFFIXES if name.endswith(s)), None)
        return base in self.histograms

    def labels(self, name):
        return set(self.values.get(name, {}))


def balanced(text, open_at):
    """The text inside the parenthesis that opens at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1 : i]
    raise ValueError(f"unbalanced parentheses in {text!r}")


def label_list(text):
    return [label.strip() for label in text.split(",") if label.strip()]


def problems(expr, exposed):
    """Why `expr` does not fit `exposed`, one sentence each; empty when it fits."""
    found = []
    bare = STRING.sub('""', expr)  # label values cannot be mistaken for names
    if POSTFIX_GROUPING.search(bare):
        found.append("write aggregations as `sum by (…) (…)`, not `sum(…) by (…)`")
    names = set(NAME.findall(bare))
    for name in sorted(names - {n for n in names if exposed.has(n)}):
        found.append(f"{name} is not on /metrics")
    for match in SELECTOR.finditer(expr):
        name, body = match.groups()
        if not exposed.has(name):
            continue
        matchers = list(MATCHER.finditer(body))
        if MATCHER.sub("", body).replace(",", "").strip():
            found.append(f"cannot read the matchers of {match.group(0)}")
        for m in matchers:
            label, op, value = m.groups()
            if label in TARGET_LABELS:
                continue
            if label not in exposed.labels(name):
                found.append(f"{name} has no label {label!r} (it has {sorted(exposed.labels(name))})")
            elif op == "=" and "$" not in value and value not in exposed.values[name][label]:
                found.append(f"{name}{{{label}={value!r}}} matches nothing: {sorted(exposed.values[name][label])}")
    for match in GROUPING.finditer(bare):
        grouped = set(NAME.findall(balanced(bare, match.end() - 1)))
        for label in label_list(match.group(2)):
            for name in sorted(grouped):
                if label not in TARGET_LABELS and label not in exposed.labels(name):
                    found.append(f"{match.group(1)} ({label}): {name} has no label {label!r}")
    for match in VECTOR_MATCHING.finditer(bare):
        for label in label_list(match.group(2)):
            for name in sorted(names):
                if label not in TARGET_LABELS and label not in exposed.labels(name):
                    found.append(f"{match.group(1)} ({label}): {name} has no label {label!r}")
    return found


def all_panels(panels):
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def dashboard_queries():
    """(where, PromQL) for every panel target and every query variable of the dashboard."""
    board = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in all_panels(board["panels"]):
        for target in panel.get("targets", []):
            queries.append((f"panel {panel['id']} {panel['title']!r} target {target['refId']}", target["expr"]))
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        match = LABEL_VALUES.match(query)
        assert match, f"variable {variable['name']}: only label_values(selector, label) is checked: {query!r}"
        selector, label = match.groups()
        # label_values(selector, label) reads `label` from the series `selector` selects.
        queries.append((f"variable {variable['name']}", f"sum by ({label}) ({selector})"))
    return queries


def alert_queries():
    rules = yaml.safe_load(ALERTS.read_text())
    return [(f"alert {r['alert']}", r["expr"]) for g in rules["groups"] for r in g["rules"]]


# ---------------------------------------------------------------------------------------------
# The files on their own.


def test_dashboard_is_importable_grafana_json():
    board = json.loads(DASHBOARD.read_text())
    assert board["schemaVersion"] >= 36
    assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert {"job", "instance"} <= set(variables)
    panels = list(all_panels(board["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {sorted(ids)}"
    for panel in panels:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}, panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        if panel.get("repeat"):
            assert panel["repeat"] in variables, panel["title"]
        for target in panel.get("targets", []):
            assert panel["datasource"]["uid"] == target["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
            assert target["expr"].strip(), panel["title"]
    heatmaps = [p for p in panels if p["type"] == "heatmap"]
    assert heatmaps, "no latency heatmap"
    for panel in heatmaps:
        (target,) = panel["targets"]
        assert target["format"] == "heatmap"
        heatmap = r"sum by \(le\) \(rate\(tolk_hop_latency_seconds_bucket\{.*\}\[\$__rate_interval\]\)\)"
        assert re.fullmatch(heatmap, target["expr"]), target["expr"]
        assert 'hop="end_to_end"' in target["expr"]


def test_alerts_are_prometheus_rules():
    rules = yaml.safe_load(ALERTS.read_text())
    names = []
    for group in rules["groups"]:
        assert group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule
            assert re.fullmatch(r"(\d+[smh])+", rule["for"]), rule
            assert rule["labels"]["severity"] in {"warning", "critical"}, rule
            assert {"summary", "description"} <= set(rule["annotations"]), rule
            names.append(rule["alert"])
    assert len(names) == len(set(names)), names
    assert {
        "TolkDown",
        "TolkTranslationLatencyHigh",
        "TolkMessagesDropped",
        "TolkBridgeDown",
        "TolkClusterDown",
        "TolkMemoryNearBudget",
    } <= set(names)


def test_the_checker_catches_renamed_metrics_and_labels():
    exposed = Exposition(
        "# TYPE tolk_messages_dropped_total counter\n"
        'tolk_messages_dropped_total{protocol="mqtt",reason="outbox_full"} 0\n'
        "# TYPE tolk_hop_latency_seconds histogram\n"
        'tolk_hop_latency_seconds_bucket{hop="end_to_end",in="mqtt",out="stomp",le="+Inf"} 1\n'
        'tolk_hop_latency_seconds_sum{hop="end_to_end",in="mqtt",out="stomp"} 0.1\n'
        'tolk_hop_latency_seconds_count{hop="end_to_end",in="mqtt",out="stomp"} 1\n'
    )
    good = 'histogram_quantile(0.99, sum by (le, in, out) (rate(tolk_hop_latency_seconds_bucket{hop="end_to_end", instance=~"$i"}[5m])))'
    assert problems(good, exposed) == []
    assert problems('sum by (reason) (rate(tolk_messages_dropped_total{protocol=~"$p"}[5m]))', exposed) == []
    for bad, says in [
        (good.replace("tolk_hop_latency_seconds", "tolk_hop_latency"), "tolk_hop_latency_bucket is not on"),
        (good.replace("by (le, in, out)", "by (le, from, out)"), "no label 'from'"),
        (good.replace('hop="end_to_end"', 'hop="e2e"'), "matches nothing"),
        (good.replace('hop="end_to_end"', 'stage="end_to_end"'), "no label 'stage'"),
        ("sum(rate(tolk_messages_dropped_total[5m])) by (reason)", "sum by (…) (…)"),
        ("tolk_messages_droped_total > 0", "tolk_messages_droped_total is not on"),
    ]:
        assert any(says in p for p in problems(bad, exposed)), (bad, problems(bad, exposed))


def promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (Debian: the prometheus package)")
    return path


def test_promtool_checks_the_rules():
    result = subprocess.run([promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# Each alert fires after its `for:` and not before, on made-up series. promtool compares
# annotations too, so the rules are tested without theirs (`check rules` validates those).
ALERT_TESTS = """
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'up{job="tolk", instance="gw:8080"}'
        values: '0x10'
      - series: 'tolk_bridge_up{job="tolk", instance="gw:8080", bridge="site", kind="mqtt"}'
        values: '1 0x10'
      - series: 'tolk_bridge_up{job="tolk", instance="gw:8080", bridge="hq", kind="amqp"}'
        values: '1x10'
      - series: 'tolk_cluster_up{job="tolk", instance="gw:8080"}'
        values: '0x10'
      - series: 'tolk_memory_bytes{job="tolk", instance="gw:8080", kind="outbox"}'
        values: '100x10'
      - series: 'tolk_memory_bytes{job="tolk", instance="gw:8080", kind="queue"}'
        values: '850x10'
      - series: 'tolk_memory_limit_bytes{job="tolk", instance="gw:8080"}'
        values: '1000x10'
      - series: 'tolk_messages_dropped_total{job="tolk", instance="gw:8080", protocol="mqtt", reason="outbox_full"}'
        values: '0+60x20'
      - series: 'tolk_messages_dropped_total{job="tolk", instance="gw:8080", protocol="mqtt", reason="queue_full"}'
        values: '0x20'
      # mqtt -> stomp: every message between 33.6 and 67.1 ms; amqp -> mqtt: all below 1 us.
      - series: 'tolk_hop_latency_seconds_bucket{job="tolk", instance="gw:8080", hop="end_to_end", in="mqtt", out="stomp", le="0.033554432"}'
        values: '0x20'
      - series: 'tolk_hop_latency_seconds_bucket{job="tolk", instance="gw:8080", hop="end_to_end", in="mqtt", out="stomp", le="0.067108864"}'
        values: '0+60x20'
      - series: 'tolk_hop_latency_seconds_bucket{job="tolk", instance="gw:8080", hop="end_to_end", in="mqtt", out="stomp", le="+Inf"}'
        values: '0+60x20'
      - series: 'tolk_hop_latency_seconds_bucket{job="tolk", instance="gw:8080", hop="end_to_end", in="amqp", out="mqtt", le="1.024e-6"}'
        values: '0+60x20'
      - series: 'tolk_hop_latency_seconds_bucket{job="tolk", instance="gw:8080", hop="end_to_end", in="amqp", out="mqtt", le="+Inf"}'
        values: '0+60x20'
    alert_rule_test:
      - {eval_time: 1m, alertname: TolkDown, exp_alerts: []}
      - eval_time: 3m
        alertname: TolkDown
        exp_alerts: [{exp_labels: {severity: critical, job: tolk, instance: "gw:8080"}}]
      - {eval_time: 2m, alertname: TolkBridgeDown, exp_alerts: []}
      - eval_time: 4m
        alertname: TolkBridgeDown
        exp_alerts: [{exp_labels: {severity: warning, job: tolk, instance: "gw:8080", bridge: site, kind: mqtt}}]
      - eval_time: 3m
        alertname: TolkClusterDown
        exp_alerts: [{exp_labels: {severity: critical, job: tolk, instance: "gw:8080"}}]
      - {eval_time: 4m, alertname: TolkMemoryNearBudget, exp_alerts: []}
      - eval_time: 6m
        alertname: TolkMemoryNearBudget
        exp_alerts: [{exp_labels: {severity: warning, job: tolk, instance: "gw:8080"}}]
      - {eval_time: 5m, alertname: TolkMessagesDropped, exp_alerts: []}
      - eval_time: 10m
        alertname: TolkMessagesDropped
        exp_alerts: [{exp_labels: {severity: warning, job: tolk, instance: "gw:8080", reason: outbox_full}}]
      - {eval_time: 5m, alertname: TolkTranslationLatencyHigh, exp_alerts: []}
      - eval_time: 12m
        alertname: TolkTranslationLatencyHigh
        exp_alerts: [{exp_labels: {severity: warning, job: tolk, instance: "gw:8080", in: mqtt, out: stomp}}]
"""


def test_alerts_fire_after_their_for_duration(tmp_path):
    binary = promtool()
    rules = yaml.safe_load(ALERTS.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "tests.yml").write_text("rule_files: [rules.yml]\n" + ALERT_TESTS)
    result = subprocess.run([binary, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------
# Against a running tolk.


@pytest.fixture(scope="module")
def tolk(tmp_path_factory):
    """A tolk whose bridge and cluster point at ports nobody listens on: both stay down, and
    their metric families are on /metrics all the same."""
    bridge = f'[[bridge]]\nname = "site"\nkind = "mqtt"\nurl = "mqtt://127.0.0.1:{free_port()}"\ntopics = ["remote/# out 1"]\n'
    cluster = f'[cluster]\nnats_urls = ["nats://127.0.0.1:{free_port()}"]\n'
    broker = Broker(tmp_path_factory.mktemp("grafana"), top='node_name = "grafana"', extra=bridge + cluster)
    broker.start()
    yield broker
    broker.stop()


def scrape(broker):
    r = requests.get(f"http://{broker.host}:{broker.port('http')}/metrics", timeout=5)
    r.raise_for_status()
    return Exposition(r.text)


def carry_two_pairs(broker):
    """One message MQTT → MQTT and one STOMP → MQTT, received."""
    received, subscribed = queue.Queue(), threading.Event()
    sub = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="grafana-sub")
    sub.on_subscribe = lambda *_: subscribed.set()
    sub.on_message = lambda _c, _u, message: received.put(message.topic)
    sub.connect(broker.host, broker.port("mqtt"))
    sub.loop_start()
    try:
        sub.subscribe("grafana/#", qos=0)
        assert subscribed.wait(WAIT), "no SUBACK"
        pub = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="grafana-pub")
        pub.connect(broker.host, broker.port("mqtt"))
        pub.loop_start()
        pub.publish("grafana/mqtt", b"1", qos=1).wait_for_publish(WAIT)
        pub.disconnect()
        pub.loop_stop()
        conn = stomp.Connection12([(broker.host, broker.port("stomp"))], timeout=WAIT)
        conn.set_listener("inbox", StompInbox())
        conn.connect(wait=True)
        conn.send("/topic/grafana/stomp", b"2")
        conn.disconnect()
        got = {received.get(timeout=WAIT), received.get(timeout=WAIT)}
        assert got == {"grafana/mqtt", "grafana/stomp"}
    finally:
        sub.disconnect()
        sub.loop_stop()


@pytest.fixture(scope="module")
def exposed(tolk):
    """/metrics once every query the files hold fits it, or at the deadline (the tests then
    say what does not fit): the bridge, cluster and histogram series appear asynchronously."""
    carry_two_pairs(tolk)
    queries = dashboard_queries() + alert_queries()
    deadline = time.monotonic() + WAIT
    while True:
        exposition = scrape(tolk)
        if not any(problems(expr, exposition) for _, expr in queries) or time.monotonic() > deadline:
            return exposition
        time.sleep(0.1)


def test_dashboard_queries_use_only_what_metrics_exposes(exposed):
    queries = dashboard_queries()
    used = {name for _, expr in queries for name in NAME.findall(STRING.sub('""', expr))}
    assert len(used) >= 20, sorted(used)
    found = [f"{where}: {p}" for where, expr in queries for p in problems(expr, exposed)]
    assert found == [], "\n".join(found)


def test_alert_queries_use_only_what_metrics_exposes(exposed):
    found = [f"{where}: {p}" for where, expr in alert_queries() for p in problems(expr, exposed)]
    assert found == [], "\n".join(found)
