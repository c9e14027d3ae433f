#!/usr/bin/env bash
# Broker CPU per message for every protocol pair of tolk at one fixed rate (default 2 pairs of
# publisher and subscriber, 10,000 msg/s in total, 3 s), against the MQTT→MQTT hop: the
# issue's aim is that a cross-protocol hop costs at most 1.5× the CPU of an MQTT→MQTT hop.
#
# Usage: benches/scripts/cross-protocol.sh [OUT_DIR]
# Environment: JOBS, TOLK_BIN (see lib.sh), RATE (msg/s, default 10000), SECONDS_EACH (default 3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
OUT=${1:-$ROOT/target/bench-compare/cross-protocol-$(date +%Y%m%d-%H%M%S)}
RATE=${RATE:-10000}
SECONDS_EACH=${SECONDS_EACH:-3}
mkdir -p "$OUT"

build_release
start_tolk
PROTOCOLS=()
declare -A URL=()
for protocol in mqtt mqttsn stomp amqp wsn xmpp; do
    if URL[$protocol]=$(target_url tolk $protocol); then PROTOCOLS+=("$protocol"); fi
done
machine_info >"$OUT/machine.txt"
MESSAGES=$((RATE * SECONDS_EACH / 2))
for p in "${PROTOCOLS[@]}"; do
    for s in "${PROTOCOLS[@]}"; do
        log "$p → $s at $RATE msg/s"
        "$BENCH" p2p --publishers 2 --rate "$RATE" --messages "$MESSAGES" \
            --publish-target "${URL[$p]}" --target "${URL[$s]}" \
            --broker-pid "$BROKER_PID" --label tolk --case "$p→$s" --json "$OUT/$p-$s.json" >&2 ||
            log "$p → $s failed"
    done
done
stop_broker

# CPU per delivered message, and its ratio to MQTT→MQTT.
cpu() { sed -n 's/^ *"cpu_us_per_delivered": *\([0-9.e+-]*\),*$/\1/p' "$OUT/$1-$2.json" 2>/dev/null | head -n1; }
p99() { sed -n '/"latency_us"/,/}/s/^ *"p99": *\([0-9]*\),*$/\1/p' "$OUT/$1-$2.json" 2>/dev/null | head -n1; }
base=$(cpu mqtt mqtt)
cat "$OUT/machine.txt"
echo
echo "| publisher → subscriber | broker CPU µs/msg | × MQTT→MQTT | p99 µs |"
echo "|---|---:|---:|---:|"
for p in "${PROTOCOLS[@]}"; do
    for s in "${PROTOCOLS[@]}"; do
        c=$(cpu "$p" "$s")
        ratio=–
        if [[ -n $c && -n $base ]]; then ratio=$(awk "BEGIN{printf \"%.2f\", $c / $base}"); fi
        printf '| %s → %s | %s | %s | %s |\n' "$p" "$s" "$(awk "BEGIN{printf \"%.1f\", ${c:-0}}")" "$ratio" "$(p99 "$p" "$s")"
    done
done
echo
echo "reports: $OUT"
