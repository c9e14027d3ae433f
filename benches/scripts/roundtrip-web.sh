#!/usr/bin/env bash
# Babovic et al.'s web test: request/reply round trips with a JavaScript MQTT client (mqtt.js
# under Node), tolk against Mosquitto 2.0 (Debian) in the same run, over plain TCP, TLS and
# WebSocket. Each round trip: the requester publishes, a responder answers on another topic,
# the requester waits for the answer before the next request (QoS 1 by default). The paper saw
# Mosquitto's websockets deliver under 10 msg/s with JS clients, and HiveMQ 354.6 msg/s.
#
# Usage: benches/scripts/roundtrip-web.sh
# Environment: ROUND_TRIPS (default 2000), PAYLOAD (bytes, default 64), QOS (default 1),
#   TOLK_BIN (a prebuilt tolk), JOBS. Needs node and npm; installs mosquitto if missing; makes a
#   throw-away certificate with the openssl command.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
ROUND_TRIPS=${ROUND_TRIPS:-2000}
PAYLOAD=${PAYLOAD:-64}
export QOS=${QOS:-1}

build_release
ensure_mosquitto
(cd "$ROOT/benches/node" && npm ci --silent --no-audit --no-fund)

log "a throw-away certificate for localhost"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
export CA_FILE=$WORK/cert.pem

ports() { free_port; P_TCP=$FREE_PORT; free_port; P_TLS=$FREE_PORT; free_port; P_WS=$FREE_PORT; }

run_tolk() {
    ports
    start_tolk_mqtt "$P_WS" "$P_TCP" "tls_bind = \"127.0.0.1:$P_TLS\"" \
        "$(printf '[tls]\ncert_file = "%s"\nkey_file = "%s"' "$WORK/cert.pem" "$WORK/key.pem")"
    measure tolk
    stop_broker
}

run_mosquitto() {
    ports
    # user root: Mosquitto started as root would switch to its own user, which cannot read a
    # key in this private temp dir.
    cat >"$WORK/mosquitto.conf" <<CONF
user root
allow_anonymous true
persistence false
log_dest none
set_tcp_nodelay true
listener $P_TCP 127.0.0.1
listener $P_TLS 127.0.0.1
certfile $WORK/cert.pem
keyfile $WORK/key.pem
listener $P_WS 127.0.0.1
protocol websockets
CONF
    "$MOSQUITTO" -c "$WORK/mosquitto.conf" >"$WORK/mosquitto.log" 2>&1 &
    BROKER_PID=$!
    wait_port "$P_TCP" "$BROKER_PID" "$WORK/mosquitto.log"
    wait_port "$P_WS" "$BROKER_PID" "$WORK/mosquitto.log"
    measure mosquitto
    stop_broker
}

# measure BROKER: one run per transport, a JSON line each into $WORK/results.
measure() {
    local url
    for url in "mqtt://127.0.0.1:$P_TCP" "mqtts://localhost:$P_TLS" "ws://127.0.0.1:$P_WS/mqtt"; do
        log "$1: $ROUND_TRIPS round trips over $url"
        printf '%s %s\n' "$1" "$(node "$ROOT/benches/node/roundtrip.mjs" "$url" "$ROUND_TRIPS" "$PAYLOAD")" >>"$WORK/results"
    done
}

run_tolk
run_mosquitto

field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$2"; }
printf '\n| transport | tolk round trips/s | Mosquitto round trips/s | × | tolk p50 / p99 µs | Mosquitto p50 / p99 µs | lost tolk / Mosquitto |\n'
printf '|---|---:|---:|---:|---:|---:|---:|\n'
for scheme in mqtt mqtts ws; do
    t=$(grep "^tolk .*\"url\":\"$scheme://" "$WORK/results")
    m=$(grep "^mosquitto .*\"url\":\"$scheme://" "$WORK/results")
    tr=$(field per_second "$t"); mr=$(field per_second "$m")
    ratio=$(awk -v a="$tr" -v b="$mr" 'BEGIN { printf (b > 0 ? "%.2f" : "-"), a / b }')
    printf '| %s | %s | %s | %s | %s / %s | %s / %s | %s / %s |\n' "$scheme" "$tr" "$mr" "$ratio" \
        "$(field p50_us "$t")" "$(field p99_us "$t")" "$(field p50_us "$m")" "$(field p99_us "$m")" \
        "$(field lost "$t")" "$(field lost "$m")"
done
printf '\nQoS %s, %s-byte payloads, %s round trips per run; machine: %s\n' "$QOS" "$PAYLOAD" "$ROUND_TRIPS" "$(nproc) cores"
