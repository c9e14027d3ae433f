#!/usr/bin/env bash
# MQTT QoS 1 through the durable store, two ways, with Debian's mosquitto clients:
#   - retained: `mosquitto_pub -l -r -q 1` sends MESSAGES lines (100 bytes each) to one topic,
#     each replacing the last retained message;
#   - to a persistent session: `mosquitto_sub -c -q 1` (clean session 0) is subscribed while
#     `mosquitto_pub -l -q 1` sends the same lines; timed until the subscriber has them all.
# Against tolk with `[storage]` on (sync always, the default), tolk with it off, and Mosquitto
# 2.0 with `persistence true` (which writes its whole database only every autosave_interval,
# 30 min by default, and at exit). Prints wall time, messages per second, messages lost, and
# the bytes each broker process wrote (/proc/PID/io write_bytes) per message. The brokers' data
# lives in STORE_DIR (default: a directory under /var/tmp, on disk, not tmpfs).
#
# A subscriber still short of MESSAGES after 60 s is counted with what it got (the rest: lost).
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
RETAINED_ROWS=
SESSION_ROWS=


row() { # row NAME START END BEFORE AFTER LOST
    awk -v n="$1" -v m="$MESSAGES" -v s="$2" -v e="$3" -v b="$4" -v a="$5" -v l="$6" \
        'BEGIN { printf "| %s | %.2f s | %.0f | %d | %.0f |\n", n, e - s, m / (e - s), l, (a - b) / m }'
}

measure_retained() { # NAME PID PORT
    local before start end after
    before=$(written "$2")
    start=$(date +%s.%N)
    mosquitto_pub -h 127.0.0.1 -p "$3" -q 1 -r -t retained/durable -l <"$LINES"
    end=$(date +%s.%N)
    after=$(written "$2")
    RETAINED_ROWS+=$(row "$1" "$start" "$end" "$before" "$after" 0)$'\n'
}

measure_session() { # NAME PID PORT
    local out before start end after got sub
    out=$(mktemp)
    # Line-buffered: the SUBACK line must reach the file while it runs.
    timeout 60 stdbuf -oL mosquitto_sub -h 127.0.0.1 -p "$3" -c -i durable-session -q 1 -t session/durable \
        -C "$MESSAGES" -d >"$out" &
    sub=$!
    # Subscribed (the SUBACK is in its debug output) before anything is published.
    until grep -q SUBACK "$out"; do kill -0 "$sub" || break; sleep 0.02; done
    before=$(written "$2")
    start=$(date +%s.%N)
    mosquitto_pub -h 127.0.0.1 -p "$3" -q 1 -t session/durable -l <"$LINES"
    wait "$sub" || true
    end=$(date +%s.%N)
    after=$(written "$2")
    got=$(grep -cE '^[0-9]{99}$' "$out" || true)
    SESSION_ROWS+=$(row "$1" "$start" "$end" "$before" "$after" $((MESSAGES - got)))$'\n'
    rm -f "$out"
}

for storage in true false; do
    dir=$(mktemp -d "$BASE/tolk-retained.XXXXXX")
    free_port; port=$FREE_PORT; free_port; http=$FREE_PORT
    printf 'data_dir = "%s"\n[http]\nbind = "127.0.0.1:%s"\n[mqttsn]\nenabled = false\n[stomp]\nenabled = false\n[amqp]\nenabled = false\n[mqtt]\nbind = "127.0.0.1:%s"\n[storage]\nenabled = %s\n' \
        "$dir" "$http" "$port" "$storage" >"$dir/tolk.toml"
    "$TOLK" --config "$dir/tolk.toml" >"$dir/log" 2>&1 &
    pid=$!
    wait_port "$port" "$pid" "$dir/log"
    name="tolk, store $([[ $storage == true ]] && echo on || echo off)"
    measure_retained "$name" "$pid" "$port"
    measure_session "$name" "$pid" "$port"
    kill -INT "$pid"; wait "$pid" || true
    rm -rf "$dir"
done
# Mosquitto as Debian ships it, then with no limit on the messages queued per client: by
# default it drops QoS 1 messages for a subscriber, online or not, beyond 1,000 queued.
for queued in default 0; do
    dir=$(mktemp -d "$BASE/mosquitto-retained.XXXXXX")
    free_port; port=$FREE_PORT
    printf 'user root\nlistener %s 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\n' "$port" "$dir" >"$dir/mosquitto.conf"
    name="Mosquitto 2.0, persistence true"
    if [[ $queued != default ]]; then
        printf 'max_queued_messages %s\n' "$queued" >>"$dir/mosquitto.conf"
        name+=", max_queued_messages $queued"
    fi
    "$MOSQUITTO" -c "$dir/mosquitto.conf" >"$dir/log" 2>&1 &
    pid=$!
    wait_port "$port" "$pid" "$dir/log"
    measure_retained "$name" "$pid" "$port"
    measure_session "$name" "$pid" "$port"
    kill -INT "$pid"; wait "$pid" || true
    rm -rf "$dir"
done
rm -f "$LINES"

echo "| broker | $MESSAGES retained QoS 1 | msg/s | lost | bytes written / msg |"
echo "|---|---:|---:|---:|---:|"
printf '%s' "$RETAINED_ROWS"
echo
echo "| broker | $MESSAGES QoS 1 to a persistent session | msg/s | lost | bytes written / msg |"
echo "|---|---:|---:|---:|---:|"
printf '%s' "$SESSION_ROWS"
