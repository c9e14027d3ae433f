#!/usr/bin/env bash
# Checks the tolk .deb packages built by deploy/package.sh.
#
# 1. Every package (arm64, armhf): the control fields, the file list with owners and modes,
#    the conffile; `dpkg -x` into a temporary directory; the packaged binary is the built one;
#    the packaged config passes `--check-config` under qemu-user; `systemd-analyze verify`
#    accepts the unit (and `systemd-analyze security` rates its sandbox).
# 2. arm64, unless TOLK_DEB_ROOT_CHECK=0: a real Debian 12 arm64 root (debootstrap, minbase +
#    adduser), in which dpkg installs the package and runs its maintainer scripts under
#    qemu-user-static; then the tolk user, the files, the conffile and the unit enablement are
#    checked, the packaged binary starts as user tolk with the packaged config and answers
#    GET /healthz, a reinstall keeps a changed config, remove keeps it and purge deletes it.
#    All of it runs as root of a private user, mount, pid and network namespace with its own
#    binfmt_misc (Linux 6.7 or later), so nothing on the host is registered or mounted, and
#    the broker's ports are private. On an older kernel this part is skipped with a warning.
#
# Needs: dpkg-deb, qemu-user, and for part 2 debootstrap and qemu-user-static (deploy/ci.sh
# installs them). Runs as root. Environment: DEBOOTSTRAP_MIRROR (default deb.debian.org).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "check-install: FAILED: $*" >&2; exit 1; }
section() { printf -- '--- %s\n' "$*"; }

shopt -s nullglob
debs=(target/deb/tolk_*_arm64.deb target/deb/tolk_*_armhf.deb)
[[ ${#debs[@]} -eq 2 ]] || fail "expected one arm64 and one armhf package in target/deb, found: ${debs[*]:-none}"

work=$(mktemp -d "${TMPDIR:-/tmp}/tolk-deb-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- 1. every package --------------------------------------------------------------------
for deb in "${debs[@]}"; do
  arch=$(dpkg-deb -f "$deb" Architecture)
  case "$arch" in
    arm64) triple=aarch64-unknown-linux-gnu;     qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu) ;;
    armhf) triple=armv7-unknown-linux-gnueabihf; qemu=(qemu-arm -L /usr/arm-linux-gnueabihf) ;;
    *) fail "$deb: unexpected architecture $arch" ;;
  esac
  section "$deb ($(stat -c %s "$deb") bytes)"
  [[ $(dpkg-deb -f "$deb" Package) == tolk ]] || fail "$deb: Package is not tolk"
  grep -q 'adduser' <<<"$(dpkg-deb -f "$deb" Depends)" || fail "$deb: does not depend on adduser"
  grep -Eq 'libc6 \(>= 2\.[0-9]+\)' <<<"$(dpkg-deb -f "$deb" Depends)" || fail "$deb: no versioned libc6 dependency"
  [[ $(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles) == /etc/tolk/tolk.toml ]] \
    || fail "$deb: conffiles is not exactly /etc/tolk/tolk.toml"

  # Owner, mode and path of every regular file.
  listing=$(dpkg-deb -c "$deb" | awk '$1 ~ /^-/ {print $1, $2, $6}' | sort)
  expected=$(sort <<'EOF'
-rw-r--r-- root/root ./etc/tolk/tolk.toml
-rw-r--r-- root/root ./lib/systemd/system/tolk.service
-rwxr-xr-x root/root ./usr/bin/tolk
-rw-r--r-- root/root ./usr/share/doc/tolk/copyright
-rw-r--r-- root/root ./usr/share/doc/tolk/deploy-pi.md
EOF
)
  [[ $listing == "$expected" ]] || fail "$deb: unexpected contents:"$'\n'"$listing"$'\n'"expected:"$'\n'"$expected"
  for script in postinst prerm postrm; do
    grep -q '^-rwxr-xr-x' <<<"$(dpkg-deb --ctrl-tarfile "$deb" | tar -tvf - "./$script")" \
      || fail "$deb: $script is missing or not executable"
  done

  root=$work/x-$arch
  dpkg -x "$deb" "$root"
  cmp "$root/usr/bin/tolk" "target/$triple/release/tolk" || fail "$deb: /usr/bin/tolk is not the built binary"
  cmp "$root/lib/systemd/system/tolk.service" deploy/tolk.service || fail "$deb: the unit differs from deploy/tolk.service"
  grep -qx 'data_dir = "/var/lib/tolk"' "$root/etc/tolk/tolk.toml" || fail "$deb: data_dir is not /var/lib/tolk"
  grep -qx 'level = "info"' "$root/etc/tolk/tolk.toml" || fail "$deb: log level is not info"
  diff <("${qemu[@]}" "$root/usr/bin/tolk" --print-default-config | grep -v '^data_dir = ') \
       <(grep -v '^data_dir = ' "$root/etc/tolk/tolk.toml") >/dev/null \
    || fail "$deb: the config differs from --print-default-config in more than data_dir"
  "${qemu[@]}" "$root/usr/bin/tolk" --config "$root/etc/tolk/tolk.toml" --check-config >/dev/null \
    || fail "$deb: the packaged config does not pass --check-config"

  if command -v systemd-analyze >/dev/null; then
    # verify resolves dependencies (multi-user.target, …) and ExecStart= inside --root.
    cp -rn /lib/systemd/system/. "$root/lib/systemd/system/"
    out=$(systemd-analyze verify --root="$root" tolk.service 2>&1) || fail "systemd-analyze verify: $out"
    [[ -z $out ]] || fail "systemd-analyze verify complained: $out"
    exposure=$(systemd-analyze security --offline=yes --root="$root" tolk.service 2>/dev/null | tail -n1 || true)
    echo "unit: systemd-analyze verify OK; ${exposure#→ }"
  else
    # No systemd here: at least the unit is well-formed INI with the settings that matter.
    python3 - "$root/lib/systemd/system/tolk.service" <<'EOF' || fail "the unit does not parse"
import configparser, sys
p = configparser.ConfigParser(strict=False, interpolation=None)
p.optionxform = str
p.read(sys.argv[1])
s = p["Service"]
assert s["Type"] == "notify" and s["User"] == "tolk" and s["StateDirectory"] == "tolk", dict(s)
assert s["ExecStart"].startswith("/usr/bin/tolk --config /etc/tolk/tolk.toml"), s["ExecStart"]
assert p["Install"]["WantedBy"] == "multi-user.target"
EOF
    echo "unit: parses (systemd-analyze not available)"
  fi
  echo "$arch: contents, conffile, config and unit OK"
done

# --- 2. dpkg install into a Debian arm64 root ---------------------------------------------
if [[ ${TOLK_DEB_ROOT_CHECK:-1} == 0 ]]; then
  echo "check-install: arm64 root install skipped (TOLK_DEB_ROOT_CHECK=0)"
  exit 0
fi

# Runs "$@" as root (full identity uid/gid map) of new user, mount, pid and network namespaces.
# The map is written from outside once unshare(2) has happened; the inner shell waits for it.
userns_run() {
  unshare --user --mount --pid --net --fork --propagation private -- \
    bash -c 'while [ "$(id -u)" != 0 ]; do sleep 0.02; done; mount -t proc proc /proc; exec "$@"' userns "$@" &
  local pid=$! i
  for i in $(seq 500); do
    [[ -e /proc/$pid/ns/user && $(readlink "/proc/$pid/ns/user") != $(readlink /proc/self/ns/user) ]] && break
    sleep 0.02
  done
  echo "0 0 4294967295" > "/proc/$pid/gid_map"
  echo "0 0 4294967295" > "/proc/$pid/uid_map"
  wait "$pid"
}

probe=$(userns_run bash -c 'mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc && echo ok' 2>/dev/null || true)
if [[ $probe != ok ]]; then
  echo "check-install: WARNING: this kernel ($(uname -r)) has no binfmt_misc per user namespace;" \
       "the arm64 root install was skipped (the dpkg -x checks above passed)" >&2
  exit 0
fi

deb=$(printf '%s\n' "${debs[@]}" | grep _arm64.deb)
root=$work/arm64-root
mirror=${DEBOOTSTRAP_MIRROR:-http://deb.debian.org/debian}
section "debootstrap: Debian 12 arm64 (minbase + adduser) into $root"
start=$SECONDS
debootstrap --foreign --arch=arm64 --variant=minbase --include=adduser bookworm "$root" "$mirror" \
  > "$work/debootstrap-1.log" 2>&1 || { tail -20 "$work/debootstrap-1.log"; fail "debootstrap first stage"; }
cp "$deb" "$root/tmp/tolk.deb"

# Everything below runs inside the namespaces: qemu-aarch64-static is registered with the
# F flag (opened now, so it need not exist inside the root).
cat > "$work/inside.sh" <<'INSIDE'
set -euo pipefail
root=$1
fail() { echo "check-install (arm64 root): FAILED: $*" >&2; exit 1; }
mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
printf '%s' ':tolk-aarch64:M::\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F' \
  > /proc/sys/fs/binfmt_misc/register
ip link set lo up
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
# container=lxc: debootstrap must not try mknod (not allowed in a user namespace); the first
# stage, run as real root, already made the device nodes.
env container=lxc chroot "$root" /debootstrap/debootstrap --second-stage > /tmp/second-stage.log 2>&1 \
  || { tail -30 "$root/debootstrap/debootstrap.log" 2>/dev/null || tail -30 /tmp/second-stage.log; fail "debootstrap second stage"; }
echo "Debian arm64 root ready: $(chroot "$root" uname -m), $(chroot "$root" cat /etc/debian_version)"
mount --bind /proc "$root/proc"
in_root() { chroot "$root" "$@"; }

echo "dpkg -i (first install)"
in_root dpkg -i /tmp/tolk.deb
grep -q '^install ok installed' <<<"$(in_root dpkg-query -W -f='${Status} ${Version}\n' tolk)" || fail "not installed"
user=$(in_root getent passwd tolk) || fail "no tolk user"
IFS=: read -r _ _ uid gid _ home shell <<<"$user"
(( uid < 1000 )) || fail "tolk is not a system user: $user"
[[ $home == /var/lib/tolk && $shell == /usr/sbin/nologin ]] || fail "tolk user: home or shell: $user"
[[ $(in_root getent group tolk | cut -d: -f3) == "$gid" ]] || fail "tolk's primary group is not tolk"
[[ -x $root/usr/bin/tolk && -f $root/lib/systemd/system/tolk.service && -f $root/etc/tolk/tolk.toml ]] || fail "files missing"
grep -q '^ /etc/tolk/tolk.toml [0-9a-f]\{32\}$' <<<"$(in_root dpkg-query -W -f='${Conffiles}\n' tolk)" || fail "conffile not registered"
[[ -L $root/etc/systemd/system/multi-user.target.wants/tolk.service ]] || fail "unit not enabled by deb-systemd-helper"
in_root /usr/bin/tolk --version

echo "start the packaged binary with the packaged config, as user tolk (StateDirectory made by hand)"
install -d -o "$uid" -g "$gid" -m 0750 "$root/var/lib/tolk"
# chroot itself in the background (not the in_root function, whose subshell would get the
# signal), exec'ing through setpriv and sh into tolk, so $! is tolk.
chroot "$root" setpriv --reuid=tolk --regid=tolk --init-groups sh -c 'cd /var/lib/tolk && exec /usr/bin/tolk --config /etc/tolk/tolk.toml' \
  > /tmp/tolk.log 2>&1 &
pid=$!
for _ in $(seq 300); do
  grep -q 'tolk ready' /tmp/tolk.log && break
  kill -0 "$pid" 2>/dev/null || { cat /tmp/tolk.log; fail "tolk exited during start-up"; }
  sleep 0.1
done
[[ $(curl -fsS --max-time 10 http://127.0.0.1:8080/healthz) == ok ]] || { cat /tmp/tolk.log; fail "GET /healthz"; }
metrics=$(curl -fsS --max-time 10 http://127.0.0.1:8080/metrics) || fail "GET /metrics"
grep -q '^# TYPE tolk_' <<<"$metrics" || fail "GET /metrics"
kill -TERM "$pid"; wait "$pid" || { cat /tmp/tolk.log; fail "tolk did not exit 0 on SIGTERM"; }
echo "ran as tolk on 0.0.0.0:8080 (private network namespace): /healthz and /metrics answered, SIGTERM -> 0"

echo "dpkg -i again, with a changed config (postinst idempotent, conffile kept)"
echo '# changed by the administrator' >> "$root/etc/tolk/tolk.toml"
in_root dpkg -i /tmp/tolk.deb
grep -q '^# changed by the administrator' "$root/etc/tolk/tolk.toml" || fail "reinstall overwrote the changed config"
[[ $(in_root getent passwd tolk) == "$user" ]] || fail "reinstall changed the tolk user"

echo "dpkg -r: binary and unit gone, config kept"
in_root dpkg -r tolk
[[ ! -e $root/usr/bin/tolk && ! -e $root/lib/systemd/system/tolk.service ]] || fail "remove left files"
[[ -f $root/etc/tolk/tolk.toml ]] || fail "remove deleted the conffile"
[[ $(readlink "$root/etc/systemd/system/tolk.service") == /dev/null ]] || fail "remove did not mask the unit (deb-systemd-helper)"
echo "dpkg -P: config and /var/lib/tolk gone, user kept"
in_root dpkg -P tolk
[[ ! -e $root/etc/tolk/tolk.toml && ! -e $root/var/lib/tolk ]] || fail "purge left the config or the state"
[[ ! -L $root/etc/systemd/system/multi-user.target.wants/tolk.service ]] || fail "purge left the enablement link"
[[ ! -L $root/etc/systemd/system/tolk.service ]] || fail "purge left the mask set on remove"
in_root getent passwd tolk >/dev/null || fail "purge removed the tolk user"
umount "$root/proc"
INSIDE
userns_run bash "$work/inside.sh" "$root" || fail "arm64 root install (see above)"
echo "check-install: arm64 root install OK in $((SECONDS - start)) s"
