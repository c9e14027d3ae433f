#!/usr/bin/env bash
# Instructions per delivered message, counted by valgrind (callgrind), for one or more tolk
# binaries: the before/after figure that does not depend on what else the machine is doing.
#
# For each binary, tolk runs under callgrind with its defaults (one protocol, free loopback
# ports) twice: a QoS 1 fan-in (4 publishers, 1 subscriber) of SMALL and of LARGE messages per
# publisher. The difference in instructions divided by the difference in messages delivered is
# the cost of one message, start-up and shutdown cancelled out. QoS 1 because a QoS 0 run under
# valgrind drops messages at the full outbox, and a drop is cheaper than a delivery.
#
# Usage: benches/scripts/instructions.sh BIN [BIN...]
#   e.g. benches/scripts/instructions.sh /tmp/old/tolk target/release/tolk /usr/sbin/mosquitto
#   A BIN named mosquitto is counted as the peer (MQTT only), with MOSQUITTO_EXTRA appended to
#   its configuration (e.g. `acl_file /path`).
# Environment: PROTOCOL (mqtt, the default, stomp or amqp), SMALL (default 1000), LARGE
#   (default 4000), EXTRA (TOML appended to each config, e.g. an [auth] section with an
#   acl_file, to count what access checks cost), RATE (messages per second offered in all,
#   paced; closed loop when unset: a low rate, e.g. 400, makes each message a wake-up of its
#   own, the load of many slow sensors), QOS (default 1); tolk-bench is built in release if
#   missing.
#   Needs valgrind (Debian package).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
PROTOCOL=${PROTOCOL:-mqtt}
QOS=${QOS:-1}
SMALL=${SMALL:-1000}
LARGE=${LARGE:-4000}
BENCH=$ROOT/target/release/tolk-bench
if [[ ! -x $BENCH ]]; then
    (cd "$ROOT" && cargo build --release -j "${JOBS:-2}" -p tolk-bench >&2)
fi
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }

# instructions BIN MESSAGES: total instructions of one run; the delivered count on stderr.
instructions() {
    local bin=$1 messages=$2 dir out
    dir=$(mktemp -d)
    free_port; local port=$FREE_PORT
    free_port; local http=$FREE_PORT
    local args
    if [[ $(basename "$bin") == mosquitto ]]; then
        # The peer, for MQTT: the same load and the same count. Its queue per client is
        # unbounded, so that a subscriber slowed down by valgrind loses nothing.
        printf 'user root\nlistener %s 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n%s\n' "$port" "${MOSQUITTO_EXTRA:-}" >"$dir/mosquitto.conf"
        args=(-c "$dir/mosquitto.conf")
    else
        {
            printf 'data_dir = "%s"\n[http]\nbind = "127.0.0.1:%s"\n[mqttsn]\nenabled = false\n' "$dir/data" "$http"
            for p in mqtt stomp amqp; do
                if [[ $p == "$PROTOCOL" ]]; then
                    printf '[%s]\nbind = "127.0.0.1:%s"\n' "$p" "$port"
                else
                    printf '[%s]\nenabled = false\n' "$p"
                fi
            done
            printf '%s\n' "${EXTRA:-}"
        } >"$dir/tolk.toml"
        args=(--config "$dir/tolk.toml")
    fi
    valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" "$bin" "${args[@]}" >"$dir/log" 2>&1 &
    local pid=$!
    wait_port "$port" "$pid" "$dir/log" >&2
    out=$("$BENCH" fan-in --qos "$QOS" --messages "$messages" ${RATE:+--rate "$RATE"} --target "$PROTOCOL://127.0.0.1:$port")
    grep -E '^ +deliver' <<<"$out" >&2
    if ! grep -qE 'lost 0,' <<<"$out"; then
        echo "messages were lost: the count is not comparable" >&2
        exit 1
    fi
    kill -INT "$pid"
    wait "$pid" || true
    sed -n 's/^summary: //p' "$dir/callgrind.out"
    if [[ -n ${KEEP:-} ]]; then cp "$dir/callgrind.out" "$KEEP.$messages"; fi
    rm -rf "$dir"
}

printf '| binary | instructions, %d msgs | instructions, %d msgs | per message |\n' $((SMALL * 4)) $((LARGE * 4))
echo '|---|---:|---:|---:|'
for bin in "$@"; do
    small=$(instructions "$bin" "$SMALL")
    large=$(instructions "$bin" "$LARGE")
    printf '| %s | %d | %d | %d |\n' "$bin" "$small" "$large" $(((large - small) / ((LARGE - SMALL) * 4)))
done
