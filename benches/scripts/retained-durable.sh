#!/usr/bin/env bash
# Retained QoS 1 publishes through the durable store: `mosquitto_pub -l -r -q 1` sends MESSAGES
# lines (100 bytes each) to one topic, each replacing the last retained message, against tolk
# with `[storage]` on (sync always, the default), tolk with it off, and Mosquitto 2.0 with
# `persistence true` (which writes its whole database only every autosave_interval, 30 min by
# default, and at exit). Prints wall time, messages per second and the bytes each broker
# process wrote (/proc/PID/io write_bytes) per message. The brokers' data lives in STORE_DIR
# (default: a directory under /var/tmp, on disk, not tmpfs).
#
# Usage: benches/scripts/retained-durable.sh   Environment: MESSAGES (default 20000), TOLK_BIN.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
MESSAGES=${MESSAGES:-20000}
BASE=${STORE_DIR:-/var/tmp}
build_release
ensure_mosquitto
LINES=$(mktemp)
for ((i = 0; i < MESSAGES; i++)); do printf '%099d\n' "$i"; done >"$LINES"

written() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }

measure() { # measure NAME PID PORT
    local before start end after
    before=$(written "$2")
    start=$(date +%s.%N)
    mosquitto_pub -h 127.0.0.1 -p "$3" -q 1 -r -t retained/durable -l <"$LINES"
    end=$(date +%s.%N)
    after=$(written "$2")
    awk -v n="$1" -v m="$MESSAGES" -v s="$start" -v e="$end" -v b="$before" -v a="$after" \
        'BEGIN { printf "| %s | %.2f s | %.0f | %.0f |\n", n, e - s, m / (e - s), (a - b) / m }'
}

echo "| broker | $MESSAGES retained QoS 1 | msg/s | bytes written / msg |"
echo "|---|---:|---:|---:|"
for storage in true false; do
    dir=$(mktemp -d "$BASE/tolk-retained.XXXXXX")
    free_port; port=$FREE_PORT; free_port; http=$FREE_PORT
    printf 'data_dir = "%s"\n[http]\nbind = "127.0.0.1:%s"\n[mqttsn]\nenabled = false\n[stomp]\nenabled = false\n[amqp]\nenabled = false\n[mqtt]\nbind = "127.0.0.1:%s"\n[storage]\nenabled = %s\n' \
        "$dir" "$http" "$port" "$storage" >"$dir/tolk.toml"
    "$TOLK" --config "$dir/tolk.toml" >"$dir/log" 2>&1 &
    pid=$!
    wait_port "$port" "$pid" "$dir/log"
    measure "tolk, store $([[ $storage == true ]] && echo on || echo off)" "$pid" "$port"
    kill -INT "$pid"; wait "$pid" || true
    rm -rf "$dir"
done
dir=$(mktemp -d "$BASE/mosquitto-retained.XXXXXX")
free_port; port=$FREE_PORT
printf 'user root\nlistener %s 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\n' "$port" "$dir" >"$dir/mosquitto.conf"
"$MOSQUITTO" -c "$dir/mosquitto.conf" >"$dir/log" 2>&1 &
pid=$!
wait_port "$port" "$pid" "$dir/log"
measure "Mosquitto 2.0, persistence true" "$pid" "$port"
kill -INT "$pid"; wait "$pid" || true
rm -rf "$dir" "$LINES"
