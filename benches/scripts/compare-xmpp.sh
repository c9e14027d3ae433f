#!/usr/bin/env bash
# XMPP publish-subscribe (XEP-0060) side by side, in one run: Prosody 0.12 (Debian's prosody,
# its `pubsub` component) against tolk's XMPP front end, XMPP→XMPP on each, plus tolk's
# cross-protocol hops XMPP→MQTT and MQTT→XMPP.
#
# Each case starts its broker afresh on free loopback ports and runs two measurements:
#   burst    the OKSE burst: 100 messages, ITERATIONS times; median time to the 100th delivery;
#   latency  one publisher at RATE msg/s for SECONDS_EACH s to one subscriber: p50/p99 µs and
#            broker CPU per message;
# then prints one Markdown table, losses included.
#
# Prosody runs from a private configuration under the work directory: c2s on a free port
# without TLS, no s2s, Nagle off (TCP_NODELAY, as tolk), pid file and data there, run as root
# if started by root. Its clients log
# in as bench/bench (SASL PLAIN, internal_plain with the account file written into its data
# directory), an admin: Prosody lets only a node's owner and publishers publish, a node a
# subscriber auto-creates has no owner, and an admin counts as owner everywhere. Nodes keep
# their items in memory, as tolk keeps its retained messages. tolk's clients log in with
# ANONYMOUS, which tolk offers when it has no [auth]. Payloads travel base64 in tolk's
# `tolk:Payload` wrapper, an opaque element to Prosody (proto/xmpp.rs).
#
# Usage: benches/scripts/compare-xmpp.sh [OUT_DIR]
#   OUT_DIR defaults to target/bench-compare/xmpp-<date-time>; it receives one JSON report per
#   measurement, machine.txt and table.md.
# Environment: JOBS, TOLK_BIN (see lib.sh), PROSODY (default: prosody on the PATH, installed
#   from Debian if missing), ITERATIONS (default 10), RATE (default 1000), SECONDS_EACH
#   (default 2), QOS (default 0; at 1 XMPP publishers wait for their iq results, 100 at most
#   outstanding).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
OUT=${1:-$ROOT/target/bench-compare/xmpp-$(date +%Y%m%d-%H%M%S)}
ITERATIONS=${ITERATIONS:-10}
RATE=${RATE:-1000}
SECONDS_EACH=${SECONDS_EACH:-2}
QOS=${QOS:-0}
mkdir -p "$OUT"

# Sets PROSODY, installing Debian's package if needed (and stopping the system-wide server it
# may start: this script runs its own).
ensure_prosody() {
    PROSODY=${PROSODY:-$(command -v prosody || true)}
    if [[ -z $PROSODY ]]; then
        log "installing prosody from Debian"
        local sudo=
        if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq prosody >&2
        if command -v systemctl >/dev/null && systemctl is-active --quiet prosody 2>/dev/null; then
            $sudo systemctl stop prosody || true
        fi
        PROSODY=$(command -v prosody || true)
    fi
    if [[ -z $PROSODY ]]; then
        echo "prosody is not installed and could not be installed" >&2
        exit 1
    fi
}

# Starts a private Prosody; sets BROKER_PID (the Lua process itself: the prosody script is
# exec'd by env) and PROSODY_PORT.
start_prosody() {
    local dir=$WORK/prosody
    rm -rf "$dir"
    mkdir -p "$dir/data/localhost/accounts" "$dir/certs"
    free_port
    PROSODY_PORT=$FREE_PORT
    cat >"$dir/prosody.cfg.lua" <<CONF
run_as_root = true
daemonize = false
pidfile = "$dir/prosody.pid"
data_path = "$dir/data"
certificates = "$dir/certs"
log = { warn = "*console" }
admins = { "bench@localhost" }
modules_enabled = { "saslauth" }
modules_disabled = { "s2s", "s2s_auth_certs", "offline" }
c2s_ports = { $PROSODY_PORT }
c2s_interfaces = { "127.0.0.1" }
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
-- Prosody leaves Nagle on by default; a lone small stanza then waits for a delayed ACK. tolk
-- sets TCP_NODELAY, so this keeps the comparison about the brokers (as for Mosquitto, lib.sh).
network_settings = { nagle = false }
authentication = "internal_plain"

VirtualHost "localhost"

Component "pubsub.localhost" "pubsub"
    autocreate_on_publish = true
    autocreate_on_subscribe = true
    storage = "memory"
CONF
    printf 'return {\n\t["password"] = "bench";\n};\n' >"$dir/data/localhost/accounts/bench.dat"
    "$PROSODY" -F --config "$dir/prosody.cfg.lua" >"$dir/out.log" 2>&1 &
    BROKER_PID=$!
    BROKER_IS_CHILD=1
    wait_port "$PROSODY_PORT" "$BROKER_PID" "$dir/out.log"
}

# The URL for protocol $2 on the running broker $1.
url() {
    case $1 in
    prosody) echo "xmpp://bench:bench@127.0.0.1:$PROSODY_PORT" ;;
    tolk) target_url tolk "$2" ;;
    esac
}

build_release
ensure_prosody
machine_info >"$OUT/machine.txt"
echo "prosody: $(dpkg-query -W -f '${Version}' prosody 2>/dev/null || echo unknown) ($PROSODY)" >>"$OUT/machine.txt"
echo "qos: $QOS" >>"$OUT/machine.txt"

CASES=("prosody xmpp xmpp" "tolk xmpp xmpp" "tolk xmpp mqtt" "tolk mqtt xmpp")
MESSAGES=$((RATE * SECONDS_EACH))
for case in "${CASES[@]}"; do
    read -r broker p s <<<"$case"
    for kind in burst latency; do
        log "$kind $p → $s on $broker"
        if [[ $broker == prosody ]]; then start_prosody; else start_tolk; fi
        if [[ $kind == burst ]]; then
            args=(burst --iterations "$ITERATIONS")
        else
            args=(p2p --publishers 1 --rate "$RATE" --messages "$MESSAGES")
        fi
        "$BENCH" "${args[@]}" --qos "$QOS" --publish-target "$(url "$broker" "$p")" --target "$(url "$broker" "$s")" \
            --broker-pid "$BROKER_PID" --label "$broker" --case "$kind $p→$s" \
            --json "$OUT/$kind.$broker.$p-$s.json" >&2 || log "$kind $p → $s on $broker failed"
        stop_broker
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"

# A top-level number of a report ($1 file, $2 key), a key of its latency_us block, the broker's
# CPU seconds (its own key, indented once, not those of its before/after samples).
field() { sed -n "s/^  \"$2\": *\([0-9.e+-]*\),*$/\1/p" "$1" 2>/dev/null | head -n1; }
latency() { sed -n "/\"latency_us\"/,/}/s/^ *\"$2\": *\([0-9]*\),*$/\1/p" "$1" 2>/dev/null | head -n1; }
burst_ms() { sed -n "s/^ *\"$2\": *\([0-9.e+-]*\),*$/\1/p" "$1" 2>/dev/null | head -n1; }
broker_cpu() { sed -n 's/^    "cpu_secs": *\([0-9.e+-]*\),*$/\1/p' "$1" 2>/dev/null | head -n1; }
ms() { if [[ -n $1 ]]; then awk "BEGIN{printf \"%.2f\", $1}"; else echo –; fi; }

{
    echo "Burst: $ITERATIONS bursts of 100 messages, median (min–max) ms from the first publish to the 100th delivery."
    echo "Latency: one publisher at $RATE msg/s for ${SECONDS_EACH} s ($MESSAGES messages) to one subscriber, µs from send to delivery;"
    echo "broker CPU per delivered message over that run (– under 0.05 s of CPU). QoS $QOS, 64-byte payloads."
    echo
    echo "| broker | publisher → subscriber | burst ms, median (min–max) | burst lost | latency p50 / p99 µs | latency lost | broker CPU µs/msg |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    for case in "${CASES[@]}"; do
        read -r broker p s <<<"$case"
        b=$OUT/burst.$broker.$p-$s.json
        l=$OUT/latency.$broker.$p-$s.json
        burst=–
        if [[ -n $(field "$b" sent) ]]; then
            burst="$(ms "$(burst_ms "$b" median_ms)") ($(ms "$(burst_ms "$b" min_ms)")–$(ms "$(burst_ms "$b" max_ms)"))"
        fi
        lat=–
        if [[ -n $(latency "$l" p50) ]]; then lat="$(latency "$l" p50) / $(latency "$l" p99)"; fi
        cpu=–
        c=$(broker_cpu "$l")
        n=$(field "$l" received)
        if [[ -n $c && -n $n ]] && awk "BEGIN{exit !($c >= 0.05 && $n > 0)}"; then
            cpu=$(awk "BEGIN{printf \"%.1f\", $c * 1e6 / $n}")
        fi
        bl=$(field "$b" lost)
        ll=$(field "$l" lost)
        printf '| %s | %s → %s | %s | %s | %s | %s | %s |\n' "$broker" "$p" "$s" "$burst" "${bl:-–}" "$lat" "${ll:-–}" "$cpu"
    done
} >"$OUT/table.md"
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
echo
echo "reports: $OUT"
