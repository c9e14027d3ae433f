#!/usr/bin/env bash
# Side-by-side AMQP 0.9.1 and STOMP 1.2 load comparison: tolk against RabbitMQ (Debian's
# rabbitmq-server, with its rabbitmq_stomp plugin).
#
# Builds tolk and tolk-bench in release, installs rabbitmq-server if missing, and for every case
# starts each broker afresh on free loopback ports (a private RabbitMQ node with its own name,
# data directory and cookie; tolk with its printed defaults), runs the same load against both
# and prints Markdown tables of tolk/rabbitmq ratios. Sustain cases (tolk-bench sustain: the
# highest rate at which every message arrives) follow the closed-loop and fixed-rate ones, with
# the broker on core 0 and the bench on core 1 when there are two cores. Both brokers route AMQP through
# `amq.topic`; STOMP uses /topic/ destinations, dotted for RabbitMQ, which refuses slashes.
#
# Usage: benches/scripts/compare-rabbitmq.sh [OUT_DIR]
#   OUT_DIR defaults to target/bench-compare/rabbitmq-<date-time>; it receives one JSON report
#   per case and broker, machine.txt and table.md.
# Environment: JOBS (cargo -j, default 2), TOLK_BIN (a prebuilt tolk to use instead of building
#   one), TOLK_BENCH_QUICK=1 (shorter runs, for checking the script itself), SCENARIOS
#   (space-separated case names to run, default all).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
OUT=${1:-$ROOT/target/bench-compare/rabbitmq-$(date +%Y%m%d-%H%M%S)}
QUICK=${TOLK_BENCH_QUICK:-0}
mkdir -p "$OUT"

build_release
ensure_rabbitmq
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

for protocol in amqp stomp; do
    if [[ $QUICK == 1 ]]; then
        add_case "$protocol-burst" $protocol "burst --iterations 3"
        add_case "$protocol-fan-in" $protocol "fan-in --messages 2000"
        add_case "$protocol-fan-in@50%" $protocol "fan-in --messages 1000"
        add_case "$protocol-idle" $protocol "idle --connections 200"
        add_case "$protocol-sustain-fan-in" $protocol "sustain --shape fan-in --start-rate 4000 --window 2s --steps 4"
        add_case "$protocol-sustain-fan-out" $protocol "sustain --shape fan-out --start-rate 2000 --window 2s --steps 4"
    else
        add_case "$protocol-burst" $protocol "burst --iterations 10"
        add_case "$protocol-fan-in" $protocol "fan-in --messages 25000"
        add_case "$protocol-fan-out" $protocol "fan-out --messages 25000"
        add_case "$protocol-p2p" $protocol "p2p --messages 10000"
        add_case "$protocol-fan-in-ack" $protocol "fan-in --qos 1 --messages 10000"
        add_case "$protocol-fan-in@50%" $protocol "fan-in --messages 20000"
        add_case "$protocol-fan-out@50%" $protocol "fan-out --messages 20000"
        add_case "$protocol-unloaded@1000" $protocol "p2p --publishers 1 --rate 1000 --messages 3000"
        # tolk's AMQP listener takes 1,024 connections by default.
        add_case "$protocol-idle" $protocol "idle --connections 1000"
        add_case "$protocol-sustain-fan-in" $protocol "sustain --shape fan-in --start-rate 4000 --window 10s --steps 8"
        add_case "$protocol-sustain-fan-out" $protocol "sustain --shape fan-out --start-rate 2000 --window 10s --steps 8"
        add_case "$protocol-sustain-fan-in-ack" $protocol "sustain --shape fan-in --qos 1 --start-rate 2000 --window 10s --steps 8"
    fi
done

machine_info >"$OUT/machine.txt"
run_cases rabbitmq tolk

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
"$BENCH" compare "$OUT" --candidate tolk --baseline rabbitmq >"$OUT/table.md"
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
echo
echo "reports: $OUT"
