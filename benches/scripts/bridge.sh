#!/usr/bin/env bash
# Bridged MQTT QoS 1 against Mosquitto's own bridge, in the same run. A "remote" Mosquitto holds
# the subscribers; the publishers connect to:
#   - direct:          the remote itself (no bridge: the baseline);
#   - tolk bridge:     tolk with `[[bridge]] topics = ["tolkbench/# out 1"]` to the remote, with
#                      the spool on disk (sync "always", as shipped), and with [storage] off;
#   - mosquitto bridge: a local Mosquitto with `connection`/`topic tolkbench/# out 1` to the
#                      remote (MQTT 5 bridge, cleansession false, its defaults otherwise).
# Two measurements per path with tolk-bench: closed-loop fan-in (4 publishers, 1 subscriber,
# MESSAGES each) for msg/s and loss, and a paced p2p run at RATE msg/s for p50/p99 latency; the
# latency a bridge adds per hop is its p50/p99 minus the direct ones.
#
# Usage: benches/scripts/bridge.sh   Environment: MESSAGES (default 5000), RATE (default 1000),
#   RUNS (default 1), TOLK_BIN.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
MESSAGES=${MESSAGES:-5000}
RATE=${RATE:-1000}
RUNS=${RUNS:-1}
build_release
ensure_mosquitto
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

# mosquitto NAME PORT [EXTRA]: starts one on PORT with EXTRA lines; its pid in PIDS.
mosquitto() {
    printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest none\nset_tcp_nodelay true\nmax_queued_messages 0\n%s\n' \
        "$2" "${3:-}" >"$WORK/$1.conf"
    "$MOSQUITTO" -c "$WORK/$1.conf" >"$WORK/$1.log" 2>&1 &
    PIDS+=($!)
    wait_port "$2" "$!" "$WORK/$1.log"
}

free_port; REMOTE=$FREE_PORT
mosquitto remote "$REMOTE"

free_port; LOCAL=$FREE_PORT
mosquitto local "$LOCAL" "connection up
address 127.0.0.1:$REMOTE
topic tolkbench/# out 1
cleansession false
bridge_protocol_version mqttv50
try_private true"

# tolk NAME STORAGE: a tolk bridged to the remote (as bridge NAME, so each has its own client
# id there), with [storage] on or off; sets PORT_OF[NAME].
declare -A PORT_OF=()
tolk() {
    local port http
    free_port; port=$FREE_PORT; free_port; http=$FREE_PORT
    TOLK_NAME=$1 start_tolk_mqtt "$http" "$port" "max_connections_per_address = 1000000" "[storage]
enabled = $2
[[bridge]]
name = \"$1\"
kind = \"mqtt\"
url = \"mqtt://127.0.0.1:$REMOTE\"
topics = [\"tolkbench/# out 1\"]"
    PIDS+=("$BROKER_PID")
    BROKER_PID=
    until curl -fs "http://127.0.0.1:$http/api/bridges" | grep -q '"state":"up"'; do sleep 0.05; done
    PORT_OF[$1]=$port
}
tolk durable true
tolk memory false

declare -A PUBLISH=([direct]=$REMOTE ["tolk bridge, spool on disk"]=${PORT_OF[durable]} \
    ["tolk bridge, store off"]=${PORT_OF[memory]} ["mosquitto bridge"]=$LOCAL)
ROWS=
for run in $(seq "$RUNS"); do
    for path in direct "tolk bridge, spool on disk" "tolk bridge, store off" "mosquitto bridge"; do
        common=(--target "mqtt://127.0.0.1:$REMOTE" --publish-target "mqtt://127.0.0.1:${PUBLISH[$path]}" --qos 1)
        log "run $run: $path, fan-in"
        "$BENCH" fan-in "${common[@]}" --messages "$MESSAGES" --json "$WORK/fan-in.json" >"$WORK/fan-in.txt"
        log "run $run: $path, p2p at $RATE msg/s"
        "$BENCH" p2p "${common[@]}" --publishers 1 --messages $((RATE * 5)) --rate "$RATE" --json "$WORK/p2p.json" >"$WORK/p2p.txt"
        rate=$(delivered_rate "$WORK/fan-in.json")
        lost=$(sed -n 's/.*lost \([0-9]*\),.*/\1/p' "$WORK/fan-in.txt" | head -n1)
        latency=$(sed -n 's/.*latency   µs p50 \([0-9]*\) p90 [0-9]* p99 \([0-9]*\) .*/\1 \/ \2/p' "$WORK/p2p.txt" | head -n1)
        p2p_lost=$(sed -n 's/.*lost \([0-9]*\),.*/\1/p' "$WORK/p2p.txt" | head -n1)
        ROWS+=$(printf '| %s | %s | %.0f | %s | %s | %s |' "$run" "$path" "$rate" "$lost" "$latency" "$p2p_lost")$'\n'
    done
done

echo
echo "MQTT QoS 1 to a remote Mosquitto, $MESSAGES messages per publisher (fan-in, 4 publishers) and p2p at $RATE msg/s"
echo
echo "| run | path | fan-in msg/s | fan-in lost | p2p p50 / p99 µs | p2p lost |"
echo "|---|---|---:|---:|---:|---:|"
printf '%s' "$ROWS"
