#!/usr/bin/env bash
# The OKSE burst matrix for tolk: for every pair of protocols whose listeners tolk has and
# tolk-bench speaks (MQTT, MQTT-SN, STOMP, AMQP 0.9.1, WS-Notification and XMPP with tolk's
# default configuration: a 6×6 matrix), publish bursts of 100 messages over one protocol to a
# subscriber on the other and time until the 100th arrives.
#
# Usage: benches/scripts/burst-matrix.sh [OUT_JSON]
# Environment: JOBS (cargo -j, default 2), ITERATIONS (bursts per cell, default 10).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
OUT=${1:-$ROOT/target/bench-compare/burst-matrix-$(date +%Y%m%d-%H%M%S).json}
mkdir -p "$(dirname "$OUT")"

build_release
start_tolk
ENDPOINTS=()
for protocol in mqtt mqttsn stomp amqp wsn xmpp; do
    if url=$(target_url tolk $protocol); then ENDPOINTS+=(--endpoint "$url"); fi
done
[[ ${#ENDPOINTS[@]} -gt 0 ]] || { echo "tolk has no listener tolk-bench can speak to" >&2; exit 1; }
machine_info
"$BENCH" burst-matrix "${ENDPOINTS[@]}" --broker-pid "$BROKER_PID" --label tolk \
    --iterations "${ITERATIONS:-10}" --json "$OUT"
stop_broker
echo "reports: $OUT"
