# Shared by the comparison scripts (source it): building, free loopback ports, and starting and
# stopping brokers so that the bench knows their pids. Not meant to be run on its own.
#
# Environment: JOBS (cargo -j, default 2); TOLK_BIN (use this tolk binary instead of building
# target/release/tolk, e.g. one built from another commit).

JOBS=${JOBS:-2}
BROKER_PID=
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tolk-bench.XXXXXX")
declare -A TOLK_PORTS=()

cleanup() {
    if [[ -n $BROKER_PID ]]; then kill "$BROKER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

# Sets TOLK and BENCH, building in release what is not given.
build_release() {
    if [[ -n ${TOLK_BIN:-} ]]; then
        log "building tolk-bench (release); tolk is $TOLK_BIN"
        cargo build --release -j"$JOBS" -p tolk-bench >&2
        TOLK=$TOLK_BIN
    else
        log "building tolk and tolk-bench (release)"
        cargo build --release -j"$JOBS" -p tolk -p tolk-bench >&2
        TOLK=$ROOT/target/release/tolk
    fi
    BENCH=$ROOT/target/release/tolk-bench
}

find_mosquitto() { command -v mosquitto || { [[ -x /usr/sbin/mosquitto ]] && echo /usr/sbin/mosquitto; } || true; }

# Sets MOSQUITTO, installing the Debian package if needed.
ensure_mosquitto() {
    MOSQUITTO=$(find_mosquitto)
    if [[ -z $MOSQUITTO ]]; then
        log "installing mosquitto from Debian"
        local sudo=
        if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mosquitto >&2
        # The package may start a system-wide broker on 1883; these scripts run their own.
        if command -v systemctl >/dev/null && systemctl is-active --quiet mosquitto 2>/dev/null; then
            $sudo systemctl stop mosquitto || true
        fi
        MOSQUITTO=$(find_mosquitto)
    fi
    if [[ -z $MOSQUITTO ]]; then
        echo "mosquitto is not installed and could not be installed" >&2
        exit 1
    fi
}

USED_PORTS=" "
# Listening ports are taken below the kernel's ephemeral range: thousands of client sockets
# closed by the idle scenario linger on ephemeral ports and would make a later bind fail.
EPHEMERAL_LOW=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
if ((EPHEMERAL_LOW < 12000)); then EPHEMERAL_LOW=32768; fi
# Sets FREE_PORT to a loopback port nothing listens on and not handed out before (a variable,
# not output: a $(…) subshell would forget USED_PORTS).
free_port() {
    local port
    while :; do
        port=$((10000 + RANDOM % (EPHEMERAL_LOW - 10000)))
        if [[ $USED_PORTS == *" $port "* ]]; then continue; fi
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            USED_PORTS+="$port "
            FREE_PORT=$port
            return
        fi
    done
}

# Waits until the broker listens on $1; on failure shows the broker's log ($3) and fails.
wait_port() {
    local port=$1 pid=$2 logfile=$3
    for _ in $(seq 300); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "broker exited during start-up; its log:" >&2
            tail -n 20 "$logfile" >&2
            BROKER_PID=
            return 1
        fi
        sleep 0.05
    done
    echo "broker did not listen on port $port; its log:" >&2
    tail -n 20 "$logfile" >&2
    return 1
}

# Starts Mosquitto; sets BROKER_PID and PORT.
start_mosquitto() {
    free_port
    PORT=$FREE_PORT
    cat >"$WORK/mosquitto.conf" <<CONF
listener $PORT 127.0.0.1
allow_anonymous true
persistence false
log_dest none
# Mosquitto leaves Nagle on by default; a lone small message then waits for a delayed ACK
# (about 40 ms). tolk sets TCP_NODELAY, so this keeps the comparison about the brokers.
set_tcp_nodelay true
CONF
    "$MOSQUITTO" -c "$WORK/mosquitto.conf" >"$WORK/mosquitto.log" 2>&1 &
    BROKER_PID=$!
    wait_port "$PORT" "$BROKER_PID" "$WORK/mosquitto.log"
}

# Starts tolk with its documented defaults, every listener moved to a free loopback port, quiet
# logs and a private data directory. Sets BROKER_PID, TOLK_PORTS[section] for every listener,
# and PORT to the MQTT port (empty without an MQTT listener).
start_tolk() {
    local section= line
    TOLK_PORTS=()
    while IFS= read -r line; do
        if [[ $line =~ ^\[([a-z_-]+)\] ]]; then section=${BASH_REMATCH[1]}; fi
        if [[ $line =~ ^bind\ *= ]]; then
            free_port
            line="bind = \"127.0.0.1:$FREE_PORT\""
            TOLK_PORTS[$section]=$FREE_PORT
        elif [[ $line =~ ^data_dir\ *= ]]; then
            line="data_dir = \"$WORK/tolk-data\""
        elif [[ $section == log && $line =~ ^level\ *= ]]; then
            line='level = "warn"'
        fi
        printf '%s\n' "$line"
    done < <("$TOLK" --print-default-config) >"$WORK/tolk.toml"
    PORT=${TOLK_PORTS[mqtt]:-}
    "$TOLK" --config "$WORK/tolk.toml" >"$WORK/tolk.log" 2>&1 &
    BROKER_PID=$!
    local first
    first=${TOLK_PORTS[mqtt]:-${TOLK_PORTS[stomp]:-${TOLK_PORTS[http]}}}
    wait_port "$first" "$BROKER_PID" "$WORK/tolk.log"
}

start_broker() {
    case $1 in
    mosquitto) start_mosquitto ;;
    tolk) start_tolk ;;
    *) echo "unknown broker $1" >&2; return 1 ;;
    esac
}

stop_broker() {
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=
}

tolk_has_mqtt() { "$TOLK" --print-default-config | grep -q '^\[mqtt\]'; }

# The machine and versions, for the record next to the figures.
machine_info() {
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "nproc: $(nproc)"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n1)"
    echo "kernel: $(uname -r)"
    if [[ -n ${MOSQUITTO:-} ]]; then
        echo "mosquitto: $("$MOSQUITTO" -h 2>/dev/null | sed -n 's/^mosquitto version //p' | head -n1)"
    fi
    echo "tolk: ${TOLK_BIN:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) (work tree)}"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
}
