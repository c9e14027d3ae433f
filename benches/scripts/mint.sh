#!/usr/bin/env bash
# MinT load (tolk-bench mint): 10,000 clients connected at once, each publishing 10 msg/s to its
# own topic mint/<client>/data for 30 s, two wildcard subscribers (mint/+/data) receiving all of
# it. Over MQTT against tolk and Mosquitto in the same run, and over MQTT-SN (one UDP socket per
# client) against tolk; Mosquitto has no MQTT-SN gateway.
#
# Builds tolk and tolk-bench in release, installs Mosquitto if missing, starts each broker
# afresh on free loopback ports for each case (broker on core 0, bench on core 1 when there are
# two cores), and writes one JSON report per case and broker, machine.txt and table.md to OUT_DIR.
#
# Usage: benches/scripts/mint.sh [OUT_DIR]
#   OUT_DIR defaults to target/bench-compare/mint-<date-time>.
# Environment: JOBS (cargo -j, default 2); TOLK_BIN (a prebuilt tolk, or a wrapper that runs
#   one, e.g. the armv7 build under qemu-arm: docs/benchmarks.md, "MinT load"); MINT_QUICK=1
#   (1,000 clients for 5 s, to check the script); MINT_DURATION (default 30s); MINT_ARGS (more
#   `tolk-bench mint` options, e.g. "--qos 1" or "--rate-per-client 1").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
OUT=${1:-$ROOT/target/bench-compare/mint-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"

if [[ ${MINT_QUICK:-0} == 1 ]]; then
    CLIENTS=1000
    DURATION=5s
else
    CLIENTS=10000
    DURATION=${MINT_DURATION:-30s}
fi

build_release
PEERS=()
if ensure_mosquitto; then PEERS+=(mosquitto); else peer_missing mosquitto "apt-get install mosquitto failed"; fi

# A descriptor per client in the bench and in the broker (both inherit this limit). The bench
# refuses to start below what --clients needs; Mosquitto's max_connections is unlimited (-1)
# by default, so its descriptors are its only limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
log "ulimit -n is $(ulimit -n) for $CLIENTS clients"

# tolk: start_tolk lifts the per-address limits (every client is 127.0.0.1); its caps on
# connections, MQTT-SN sessions and MQTT-SN topic ids (10,000 each by default) are raised above
# the fleet for the run.
TOLK_SET[mqtt.max_connections]=$((CLIENTS + 1000))
TOLK_SET[mqttsn.max_clients]=$((CLIENTS + 1000))
TOLK_SET[mqttsn.max_topic_ids]=$((CLIENTS + 1000))

BENCH_TASKSET=()
if ((PIN_CORES)); then
    BROKER_TASKSET=(taskset -c 0)
    BENCH_TASKSET=(taskset -c 1)
fi

# mint CASE BROKER PROTOCOL: one run against a freshly started broker.
mint() {
    local case=$1 broker=$2 protocol=$3 url
    log "$case against $broker"
    if ! start_broker "$broker"; then
        log "$broker did not start: skipping $case against it"
        return
    fi
    url=$(target_url "$broker" "$protocol")
    # shellcheck disable=SC2086 # MINT_ARGS is a word list by design
    "${BENCH_TASKSET[@]}" "$BENCH" mint --target "$url" --clients "$CLIENTS" --duration "$DURATION" \
        --broker-pid "$BROKER_PID" --label "$broker" --case "$case" --json "$OUT/$case.$broker.json" \
        ${MINT_ARGS:-} >&2 || log "$case against $broker failed"
    stop_broker
}

{
    machine_info
    echo "mint: $CLIENTS clients for $DURATION ${MINT_ARGS:-}"
    if ((PIN_CORES)); then
        echo "pinning: the broker on core 0, tolk-bench on core 1 (taskset)"
    else
        echo "pinning: none (fewer than 2 cores, or no taskset): the broker and the bench share cores"
    fi
} >"$OUT/machine.txt"
for peer in "${PEERS[@]}"; do mint mint-mqtt "$peer" mqtt; done
mint mint-mqtt tolk mqtt
mint mint-mqttsn tolk mqttsn

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
"$BENCH" compare "$OUT" --candidate tolk --baseline mosquitto >"$OUT/table.md"
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
echo
echo "reports: $OUT"
