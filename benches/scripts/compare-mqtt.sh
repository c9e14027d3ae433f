#!/usr/bin/env bash
# Side-by-side MQTT load comparison: tolk against Mosquitto 2.0 (Debian package).
#
# Builds tolk and tolk-bench in release, installs mosquitto if missing, and for every scenario
# starts each broker afresh on free loopback ports (so the bench knows its pid and every
# scenario starts from a clean process), runs the same load against both, then prints a
# Markdown table of tolk/mosquitto ratios. Until tolk has an MQTT listener, only Mosquitto is
# measured (the table's tolk columns stay empty).
#
# Usage: benches/scripts/compare-mqtt.sh [OUT_DIR]
#   OUT_DIR defaults to target/bench-compare/<date-time>; it receives one JSON report per
#   scenario and broker, machine.txt and table.md.
# Environment: JOBS (cargo -j, default 2), TOLK_BIN (a prebuilt tolk to use instead of building
#   one), TOLK_BENCH_QUICK=1 (shorter runs, for checking the script itself), SCENARIOS
#   (space-separated case names to run, default all).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
OUT=${1:-$ROOT/target/bench-compare/$(date +%Y%m%d-%H%M%S)}
QUICK=${TOLK_BENCH_QUICK:-0}
mkdir -p "$OUT"

build_release
ensure_mosquitto
# Idle connections need a file descriptor each, in the bench and in the broker.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# The delivered rate of a finished report, in messages/s.
delivered_rate() { sed -n 's/^ *"delivered_rate": *\([0-9.e+]*\),*$/\1/p' "$1" | head -n1; }

BROKERS=(mosquitto)
if tolk_has_mqtt; then
    BROKERS=(mosquitto tolk)
else
    log "tolk has no [mqtt] listener yet: measuring mosquitto only"
fi

# case name → tolk-bench arguments
declare -A CASES
ORDER=()
add_case() { ORDER+=("$1"); CASES[$1]=$2; }
if [[ $QUICK == 1 ]]; then
    add_case burst "burst --iterations 3"
    add_case fan-in "fan-in --messages 2000"
    add_case fan-out "fan-out --messages 2000"
    add_case p2p "p2p --messages 1000"
    add_case fan-in@50% "fan-in --messages 1000"
    add_case unloaded@1000 "p2p --publishers 1 --rate 1000 --messages 500"
    add_case slow-subscriber "slow-subscriber --payload 1024 --messages 5000"
    add_case idle "idle --connections 500"
else
    add_case burst "burst --iterations 10"
    # Closed loop, full speed: each runs one to a few seconds on a small machine.
    add_case fan-in "fan-in --messages 50000"
    add_case fan-out "fan-out --messages 50000"
    add_case p2p "p2p --messages 25000"
    add_case p2p-qos1 "p2p --qos 1 --messages 10000"
    add_case fan-in-qos1 "fan-in --qos 1 --messages 10000"
    # Open loop at half of the slower broker's closed-loop rate (filled in below).
    add_case fan-in@50% "fan-in --messages 25000"
    add_case fan-out@50% "fan-out --messages 25000"
    # Latency without load: one pair at 1,000 msg/s for three seconds.
    add_case unloaded@1000 "p2p --publishers 1 --rate 1000 --messages 3000"
    add_case slow-subscriber "slow-subscriber --payload 1024 --messages 100000"
    add_case idle "idle --connections 10000"
fi
SELECTED=${SCENARIOS:-${ORDER[*]}}

machine_info >"$OUT/machine.txt"

for case in "${ORDER[@]}"; do
    [[ " $SELECTED " == *" $case "* ]] || continue
    args=${CASES[$case]}
    if [[ $case == *@50% ]]; then
        # Half the slower broker's closed-loop delivery rate, divided back to a publish rate.
        base=${case%@50%}
        rate=
        for broker in "${BROKERS[@]}"; do
            r=$(delivered_rate "$OUT/$base.$broker.json" 2>/dev/null || true)
            [[ -n $r ]] || continue
            if [[ -z $rate ]] || awk "BEGIN{exit !($r < $rate)}"; then rate=$r; fi
        done
        if [[ -z $rate ]]; then log "skipping $case: no closed-loop $base result"; continue; fi
        subscribers=1
        if [[ $base == fan-out ]]; then subscribers=4; fi
        rate=$(awk "BEGIN{printf \"%d\", $rate * 0.5 / $subscribers}")
        args="$args --rate $rate"
    fi
    for broker in "${BROKERS[@]}"; do
        log "$case against $broker"
        if ! start_broker "$broker"; then
            log "$broker did not start: skipping $case against it"
            continue
        fi
        # shellcheck disable=SC2086 # args is a word list by design
        "$BENCH" $args --target "mqtt://127.0.0.1:$PORT" --broker-pid "$BROKER_PID" \
            --label "$broker" --case "$case" --json "$OUT/$case.$broker.json" >&2 ||
            log "$case against $broker failed"
        stop_broker
    done
done

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
"$BENCH" compare "$OUT" --candidate tolk --baseline mosquitto >"$OUT/table.md"
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
echo
echo "reports: $OUT"
