#!/usr/bin/env bash
# The hardening measurements, tolk beside Mosquitto where the attack is plain MQTT:
#
#  1. Memory attacks (`tolk-bench attack`): a fresh broker with its default configuration per
#     attack, one client offering ~1 MiB messages that the broker would have to hold for
#     someone who does not take them; the broker's peak RSS (VmHWM) afterwards, and what the
#     attacker saw: accepted, refused, kept (read back), connections closed.
#  2. The retained stall (`tolk-bench retained-stall`): 100,000 retained messages stored, then a
#     probe pair at 1,000 msg/s while a new client subscribes to `#` and is sent all of them;
#     the probe's latency before, during and after, and how long `#` took.
#
# Builds tolk and tolk-bench in release, installs mosquitto if missing, starts every broker
# afresh on free loopback ports, and writes attacks.md, stall.md, metrics.txt (tolk's non-zero
# memory, drop and close figures at the end of each run; the text report of an attack has them
# as they were before its read-back), machine.txt, and each run's report as text and JSON.
#
# Usage: benches/scripts/memory-attacks.sh [OUT_DIR]
#   OUT_DIR defaults to target/bench-attacks/<date-time>.
# Environment: JOBS (cargo -j, default 2), TOLK_BIN (a prebuilt tolk), TOLK_BENCH_QUICK=1 (a
#   tenth of the messages, to check the script), ATTACKS (space-separated subset of: retained
#   offline-session amqp-queue wsn-pull-point stalled-reader retained-stall), PAYLOAD (bytes per
#   attack message, default 1048000: the largest round figure whose MQTT packet and WS-N
#   request fit tolk's default 1 MiB limits).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
OUT=${1:-$ROOT/target/bench-attacks/$(date +%Y%m%d-%H%M%S)}
QUICK=${TOLK_BENCH_QUICK:-0}
SELECTED=${ATTACKS:-retained offline-session amqp-queue wsn-pull-point stalled-reader retained-stall}
PAYLOAD=${PAYLOAD:-1048000}
mkdir -p "$OUT"

build_release
ensure_mosquitto
machine_info >"$OUT/machine.txt"

# Messages per attack, as the issue suggests them: 2,000 retained topics (2 GB offered), 500
# WS-N Notifies, 1,000 for the rest; 100,000 retained messages for the stall.
scale=1
if [[ $QUICK == 1 ]]; then scale=10; fi
n() { echo $(($1 / scale)); }

# tolk's /metrics lines about memory, drops and closed connections that are not zero.
tolk_metrics() {
    curl -fsS "http://127.0.0.1:${TOLK_PORTS[http]}/metrics" |
        grep -E '^tolk_(memory_bytes|memory_limit_bytes|messages_dropped_total|connections_closed_total)' |
        awk '$NF != 0' || true
}

# run_on BROKER PROTOCOL CASE SUBCOMMAND ARGS...: a fresh broker, one run, its row in the table.
run_on() {
    local broker=$1 protocol=$2 case=$3 command=$4 url table=attacks.md
    shift 4
    if [[ $command == retained-stall ]]; then table=stall.md; fi
    log "$case against $broker"
    if ! start_broker "$broker"; then
        log "$broker did not start: skipping $case"
        return
    fi
    url=$(target_url "$broker" "$protocol")
    local extra=() slug
    # The case as a file name: runs of other characters become one dash.
    slug=$(tr -cs 'A-Za-z0-9_' '-' <<<"$case")
    slug=${slug#-}
    local name=$OUT/${slug%-}.$broker
    if [[ $broker == tolk && $command == attack ]]; then
        # Read when the attack is over, before the read-back takes messages out.
        extra=(--metrics-url "http://127.0.0.1:${TOLK_PORTS[http]}/metrics")
    fi
    "$BENCH" "$command" "$@" "${extra[@]}" --target "$url" --broker-pid "$BROKER_PID" --label "$broker" \
        --case "$case" --json "$name.json" --table "$OUT/$table" | tee "$name.txt" >&2 ||
        log "$case against $broker failed"
    if [[ $broker == tolk ]]; then
        { echo "$case, at the end:"; tolk_metrics | sed 's/^/    /'; } >>"$OUT/metrics.txt"
    fi
    stop_broker
}

selected() { [[ " $SELECTED " == *" $1 "* ]]; }

if selected retained; then
    for b in tolk mosquitto; do run_on $b mqtt retained attack retained --messages "$(n 2000)" --payload "$PAYLOAD"; done
fi
if selected offline-session; then
    for b in tolk mosquitto; do
        run_on $b mqtt offline-session attack offline-session --messages "$(n 1000)" --payload "$PAYLOAD"
    done
fi
if selected amqp-queue; then
    run_on tolk amqp amqp-queue attack amqp-queue --messages "$(n 1000)" --payload "$PAYLOAD"
fi
if selected wsn-pull-point; then
    run_on tolk wsn wsn-pull-point attack wsn-pull-point --messages "$(n 500)" --payload "$PAYLOAD"
fi
if selected stalled-reader; then
    for qos in 0 1; do
        for b in tolk mosquitto; do
            run_on $b mqtt "stalled-reader qos$qos" attack stalled-reader --qos $qos --messages "$(n 1000)" \
                --payload "$PAYLOAD"
        done
    done
fi
if selected retained-stall; then
    stall="retained-stall --retained $(n 100000)"
    for qos in 0 1; do
        # 100,000 retained messages cost 46 MB by tolk's count (384 B of overhead each), more
        # than the default retained_max_bytes (32 MiB): give the store room for all of them.
        TOLK_SET[core.retained_max_bytes]=67108864
        # shellcheck disable=SC2086 # stall is a word list by design
        run_on tolk mqtt "# QoS $qos, retained_max_bytes 64 MiB" $stall --qos $qos
        TOLK_SET=()
        # shellcheck disable=SC2086
        run_on mosquitto mqtt "# QoS $qos" $stall --qos $qos
    done
    # shellcheck disable=SC2086
    run_on tolk mqtt "# QoS 0, default config" $stall --qos 0
fi

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
cat "$OUT/machine.txt"
for f in attacks.md stall.md metrics.txt; do
    if [[ -s $OUT/$f ]]; then
        echo
        cat "$OUT/$f"
    fi
done
echo
echo "reports: $OUT"
