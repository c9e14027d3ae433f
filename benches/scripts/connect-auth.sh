#!/usr/bin/env bash
# CPU per MQTT connection with authentication off and on, measured in the same run: tolk is
# started twice (no [auth]; [auth] with a password file from `tolk passwd`), and tolk-bench
# opens, holds and closes CONNECTIONS connections against each; the broker's CPU time (from
# /proc/PID/stat) is divided by the connections. With auth on, every connection logs in as one
# user, so all but the first are served from the memory of successes (a reconnect storm); the
# cold cost of one login is `cargo bench -p tolk-benches --bench auth`.
#
# Usage: benches/scripts/connect-auth.sh   Environment: CONNECTIONS (default 2000), TOLK_BIN, JOBS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=benches/scripts/lib.sh
source "$ROOT/benches/scripts/lib.sh"
CONNECTIONS=${CONNECTIONS:-2000}
build_release
"$TOLK" passwd "$WORK/passwd" bench --password bench-pw

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run() { # run MODE: prints "MODE conn/s cpu_us_per_conn"
    free_port; local port=$FREE_PORT; free_port; local http=$FREE_PORT
    local auth="" user=""
    if [[ $1 == on ]]; then
        auth=$'[auth]\npassword_file = "'"$WORK/passwd"$'"\n'
        user="bench:bench-pw@"
    fi
    start_tolk_mqtt "$http" "$port" "max_connections_per_address = 1000000" "$auth"
    local before after
    before=$(cpu_ticks "$BROKER_PID")
    "$BENCH" idle --connections "$CONNECTIONS" --target "mqtt://${user}127.0.0.1:$port" --broker-pid "$BROKER_PID" \
        >"$WORK/idle-$1.log" 2>&1
    after=$(cpu_ticks "$BROKER_PID")
    local rate
    rate=$(sed -n 's/.*connected in [0-9.]* s = \([0-9]*\) conn\/s.*/\1/p' "$WORK/idle-$1.log" | head -n1)
    grep -q " 0 failed" "$WORK/idle-$1.log" || { cat "$WORK/idle-$1.log" >&2; echo "connections failed" >&2; exit 1; }
    stop_broker
    # Clock ticks are 10 ms: the figure is coarse below a few thousand connections.
    awk -v m="$1" -v r="$rate" -v t=$((after - before)) -v n="$CONNECTIONS" \
        'BEGIN { printf "| %s | %s | %.1f |\n", m, r, t * 10000 / n }'
}

printf '| auth | connections/s | broker CPU µs per connection |\n|---|---:|---:|\n'
run off
run on
run off
run on
printf '\n%s connections per run, held and closed; one user for every login\n' "$CONNECTIONS"
