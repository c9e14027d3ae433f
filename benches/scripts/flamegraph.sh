#!/usr/bin/env bash
# CPU flamegraphs of tolk's hot paths: the broker pinned to core 0 and the bench to core 1,
# `perf record` on the broker at a fixed offered rate, folded by inferno into an SVG.
#
#   benches/scripts/flamegraph.sh [OUT_DIR]
#     OUT_DIR defaults to target/flamegraph/<date-time>; it receives <case>.svg, <case>.folded
#     and <case>.txt (the bench's report) for:
#       mqtt-fan-in     4 MQTT publishers → 1 MQTT subscriber, QoS 0, 10,000 msg/s each
#       mqtt-to-amqp    1 MQTT publisher → 1 AMQP consumer, 10,000 msg/s
#
# Builds tolk with the `profiling` cargo profile (symbols, thin LTO) and tolk-bench in release;
# installs inferno with `cargo install` into ${XDG_CACHE_HOME:-~/.cache}/tolk-bench, and perf
# from Debian (linux-perf) when missing. Environment: TOLK_BIN (a tolk with symbols to use
# instead), RATE (per publisher, default 10000), MESSAGES (per publisher, default 40000).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
OUT=${1:-$ROOT/target/flamegraph/$(date +%Y%m%d-%H%M%S)}
RATE=${RATE:-10000}
MESSAGES=${MESSAGES:-40000}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/tolk-bench
mkdir -p "$OUT" "$CACHE"

command -v perf >/dev/null || { log "installing perf"; apt-get install -y -qq linux-perf >/dev/null; }
[[ -x $CACHE/bin/inferno-flamegraph ]] || cargo install inferno --locked --root "$CACHE" -j"$JOBS" >&2
if [[ -n ${TOLK_BIN:-} ]]; then
    TOLK=$TOLK_BIN
else
    log "building tolk (profiling profile: symbols, thin LTO)"
    cargo build --profile profiling -j"$JOBS" -p tolk >&2
    TOLK=$ROOT/target/profiling/tolk
fi
cargo build --release -j"$JOBS" -p tolk-bench >&2
BENCH=$ROOT/target/release/tolk-bench

BROKER_TASKSET=()
bench_taskset=()
if ((PIN_CORES)); then BROKER_TASKSET=(taskset -c 0); bench_taskset=(taskset -c 1); fi

# profile CASE SUBSCRIBER-PROTOCOL PUBLISHER-PROTOCOL BENCH-ARGS...: one broker started afresh,
# one perf recording of it while the bench runs, one SVG.
profile() {
    local case=$1 sub=$2 pub=$3
    shift 3
    log "$case"
    start_tolk
    local target publish_target
    target=$(target_url tolk "$sub")
    publish_target=$(target_url tolk "$pub")
    perf record -F 999 -g --call-graph dwarf,16384 -p "$BROKER_PID" -o "$WORK/$case.data" 2>"$WORK/perf.log" &
    local perf_pid=$!
    # perf says nothing once it is attached; its output file appears then.
    for _ in $(seq 100); do [[ -s $WORK/$case.data ]] && break; sleep 0.05; done
    "${bench_taskset[@]}" "$BENCH" "$@" --target "$target" --publish-target "$publish_target" \
        --broker-pid "$BROKER_PID" --label tolk --case "$case" | tee "$OUT/$case.txt"
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    stop_broker
    perf script -i "$WORK/$case.data" 2>/dev/null | "$CACHE/bin/inferno-collapse-perf" >"$OUT/$case.folded"
    "$CACHE/bin/inferno-flamegraph" --title "tolk: $case ($(git rev-parse --short HEAD))" --minwidth 0.5 \
        <"$OUT/$case.folded" >"$OUT/$case.svg"
    rm -f "$WORK/$case.data"
}

profile mqtt-fan-in mqtt mqtt fan-in --messages "$MESSAGES" --rate "$RATE"
profile mqtt-to-amqp amqp mqtt p2p --publishers 1 --messages "$MESSAGES" --rate "$RATE"
ls -l "$OUT"
