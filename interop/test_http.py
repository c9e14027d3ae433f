"""The HTTP endpoints, read by third-party parsers: Prometheus' own text-format parser and a
JSON client, as a scraper and a dashboard would."""

import requests
from prometheus_client.parser import text_string_to_metric_families


def url(broker, path):
    return f"http://{broker.host}:{broker.port('http')}{path}"


def test_healthz(broker):
    r = requests.get(url(broker, "/healthz"), timeout=5)
    assert r.status_code == 200
    assert r.text == "ok\n"


def test_metrics_parse_with_the_prometheus_parser(broker):
    r = requests.get(url(broker, "/metrics"), timeout=5)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    assert families["tolk_hop_latency_seconds"].type == "histogram"
    assert families["tolk_messages_in"].type == "counter"
    assert families["tolk_connections"].type == "gauge"
    protocols = {s.labels["protocol"] for s in families["tolk_connections"].samples}
    assert {"mqtt", "mqttsn", "stomp", "amqp", "wsn"} <= protocols
    reasons = {s.labels["reason"] for s in families["tolk_messages_dropped"].samples}
    assert {"outbox_full", "queue_full", "expired"} <= reasons


def test_latency_api_is_json(broker):
    r = requests.get(url(broker, "/api/latency"), timeout=5)
    assert r.status_code == 200
    body = r.json()
    assert body["unit"] == "microseconds"
    assert isinstance(body["rows"], list)
