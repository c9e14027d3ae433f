#!/usr/bin/env bash
# What "acknowledged means on disk" costs, in one run: persistent AMQP messages with publisher
# confirms into a durable queue (tolk-bench durable-confirms: 100-byte messages, a window of
# WINDOW unconfirmed) against tolk with the store on (sync always, the default), tolk with it
# off, and RabbitMQ (Debian's rabbitmq-server, a private node); then retained MQTT QoS 1
# through retained-durable.sh (tolk on/off against Mosquitto with `persistence true`). Data
# directories are on disk ($TMPDIR, default /tmp; not tmpfs). Prints Markdown tables; the
# AMQP table shows nacks and confirmed messages missing from the queue (loss), and the bytes
# each broker process wrote per message (/proc/PID/io write_bytes).
#
# With RECOVERY=N (e.g. 1000000), it then fills a durable queue with N persistent messages
# (limits raised to hold them), restarts tolk and prints how long the restart took to read them
# back (the "store opened" log line), with the broker's RSS after it.
#
# Usage: benches/scripts/durable.sh   Environment: MESSAGES (default 20000), WINDOW (64),
#   RECOVERY (0), TOLK_BIN, JOBS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
MESSAGES=${MESSAGES:-20000}
WINDOW=${WINDOW:-64}
build_release
ensure_rabbitmq


amqp_row() { # amqp_row LABEL URL
    local before row after
    before=$(written "$BROKER_PID")
    row=$("$BENCH" durable-confirms --target "$2" --messages "$MESSAGES" --window "$WINDOW" --label "$1")
    after=$(written "$BROKER_PID")
    echo "$row $(((after - before) / MESSAGES)) |"
}

echo "| broker | persistent messages | time | confirmed msg/s | nacked | lost | bytes written / msg |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for storage in true false; do
    TOLK_SET=([storage.enabled]=$storage [mqtt.enabled]=false [stomp.enabled]=false [mqttsn.enabled]=false [wsn.enabled]=false)
    start_tolk
    amqp_row "tolk, store $([[ $storage == true ]] && echo on || echo off)" "$(target_url tolk amqp)"
    stop_broker
done
start_rabbitmq
amqp_row "RabbitMQ, durable queue" "$(target_url rabbitmq amqp)"
stop_broker
echo
MESSAGES=$MESSAGES TOLK_BIN=$TOLK bash "$ROOT/benches/scripts/retained-durable.sh"

RECOVERY=${RECOVERY:-0}
if ((RECOVERY > 0)); then
    TOLK_SET=([mqtt.enabled]=false [stomp.enabled]=false [mqttsn.enabled]=false [wsn.enabled]=false
        [log.level]='"info"' [core.memory_budget_bytes]=4294967296 [core.queue_max_bytes]=4294967296
        [core.queue_max_length]=$((RECOVERY * 2)))
    start_tolk
    "$BENCH" durable-confirms --target "$(target_url tolk amqp)" --messages "$RECOVERY" --window "$WINDOW" \
        --label "fill" --keep >/dev/null
    stop_broker
    start_tolk
    echo
    echo "restart with $RECOVERY stored queue messages: $(grep -o 'queued=[0-9]* elapsed=[^ ]*' "$WORK/tolk.log"), RSS $(awk '/VmRSS/ {print $2, $3}' "/proc/$BROKER_PID/status")"
    stop_broker
fi
