#!/usr/bin/env bash
# Side-by-side MQTT load comparison: tolk against Mosquitto 2.0 (Debian package).
#
# Builds tolk and tolk-bench in release, installs mosquitto if missing, and for every scenario
# starts each broker afresh on free loopback ports (so the bench knows its pid and every
# scenario starts from a clean process), runs the same load against both, then prints a
# Markdown table of tolk/mosquitto ratios.
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

if [[ $QUICK == 1 ]]; then
    add_case burst mqtt "burst --iterations 3"
    add_case fan-in mqtt "fan-in --messages 2000"
    add_case fan-out mqtt "fan-out --messages 2000"
    add_case p2p mqtt "p2p --messages 1000"
    add_case fan-in@50% mqtt "fan-in --messages 1000"
    add_case unloaded@1000 mqtt "p2p --publishers 1 --rate 1000 --messages 500"
    add_case slow-subscriber mqtt "slow-subscriber --payload 1024 --messages 5000"
    add_case idle mqtt "idle --connections 500"
else
    add_case burst mqtt "burst --iterations 10"
    # Closed loop, full speed: each runs one to a few seconds on a small machine.
    add_case fan-in mqtt "fan-in --messages 50000"
    add_case fan-out mqtt "fan-out --messages 50000"
    add_case p2p mqtt "p2p --messages 25000"
    add_case p2p-qos1 mqtt "p2p --qos 1 --messages 10000"
    add_case fan-in-qos1 mqtt "fan-in --qos 1 --messages 10000"
    # Open loop at half of the slower broker's closed-loop rate.
    add_case fan-in@50% mqtt "fan-in --messages 25000"
    add_case fan-out@50% mqtt "fan-out --messages 25000"
    # Latency without load: one pair at 1,000 msg/s for three seconds.
    add_case unloaded@1000 mqtt "p2p --publishers 1 --rate 1000 --messages 3000"
    add_case slow-subscriber mqtt "slow-subscriber --payload 1024 --messages 100000"
    add_case idle mqtt "idle --connections 10000"
fi

machine_info >"$OUT/machine.txt"
run_cases mosquitto tolk

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
"$BENCH" compare "$OUT" --candidate tolk --baseline mosquitto >"$OUT/table.md"
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
echo
echo "reports: $OUT"
