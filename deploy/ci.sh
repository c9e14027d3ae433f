#!/usr/bin/env bash
# CI for the Raspberry Pi deployment (issue 10), called from .ci/run; runs as root on Debian 12
# x86_64. Everything it needs it installs: Debian's cross gcc, qemu-user(-static), debootstrap
# and mosquitto-clients with apt-get, the two Rust targets with rustup. Then:
#   1. cross-builds tolk for aarch64 and armv7 (deploy/build.sh), stripped, at most 8 MB each;
#   2. checks that no dependency needs openssl or aws-lc for them (deploy/check-deps.sh), and
#      that the cluster, left out of these binaries for now, cross-compiles;
#   3. smoke-tests both binaries under qemu-user on free loopback ports (deploy/smoke.py);
#   4. builds the arm64 and armhf .deb packages (deploy/package.sh);
#   5. checks the packages and installs the arm64 one into a Debian arm64 root
#      (deploy/check-install.sh).
# Measured on 2 cores with the packages already installed: 290 s (both release builds in one
# cargo run 176 s, debootstrap + emulated install 105 s, the rest 10 s); apt-get and rustup
# add about a minute on a fresh machine, and the builds up to twice as long when the cores are
# shared. TOLK_DEB_ROOT_CHECK=0 skips the arm64 root.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} CARGO_TERM_COLOR=never CARGO_INCREMENTAL=0
export DEBIAN_FRONTEND=noninteractive

targets=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
max_bytes=8000000
started=$SECONDS
timings=()
step_start=$SECONDS
step_name=""
step() {
  [[ -n $step_name ]] && timings+=("$(printf '%5d s  %s' $((SECONDS - step_start)) "$step_name")")
  step_name=$1; step_start=$SECONDS
  printf '\n==> deploy: %s\n' "$1"
}

step "Debian packages"
packages=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross lld-16
          qemu-user mosquitto-clients curl iproute2)
[[ ${TOLK_DEB_ROOT_CHECK:-1} == 0 ]] || packages+=(qemu-user-static debootstrap)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

step "Rust targets"
installed=$(rustup target list --installed)
for t in "${targets[@]}"; do grep -qx "$t" <<<"$installed" || rustup target add "$t"; done

step "Cross build (release)"
deploy/build.sh "${targets[@]}"

step "Binary sizes (stripped, at most $max_bytes bytes)"
for t in "${targets[@]}"; do
  bin=target/$t/release/tolk
  size=$(stat -c %s "$bin")
  if grep -q '\.symtab' <<<"$(readelf -S "$bin")"; then echo "FAILED: $bin is not stripped"; exit 1; fi
  (( size <= max_bytes )) || { echo "FAILED: $bin is $size bytes, more than $max_bytes"; exit 1; }
  printf '%-34s %9d bytes  %s\n' "$t" "$size" "$(file -b "$bin" 2>/dev/null | cut -d, -f1-2 || true)"
done

step "No openssl / aws-lc for the ARM targets"
deploy/check-deps.sh

step "The cluster (left out of the packaged binaries for now) cross-compiles"
# The packages are built without it (deploy/build.sh); this keeps it building for both Pis.
for t in "${targets[@]}"; do cargo check -p tolk-cluster --target "$t"; done

step "Smoke tests under qemu-user"
mkdir -p target/deploy
python3 deploy/smoke.py --name aarch64 --runner "qemu-aarch64 -L /usr/aarch64-linux-gnu" \
  --json target/deploy/smoke-aarch64.json target/aarch64-unknown-linux-gnu/release/tolk
python3 deploy/smoke.py --name armv7 --runner "qemu-arm -L /usr/arm-linux-gnueabihf" \
  --json target/deploy/smoke-armv7.json target/armv7-unknown-linux-gnueabihf/release/tolk

step "Packages (dpkg-deb)"
rm -f target/deb/tolk_*.deb
for t in "${targets[@]}"; do deploy/package.sh "$t"; done

step "Package checks and arm64 root install"
deploy/check-install.sh

step "Summary"
echo "deploy: step times"
printf '%s\n' "${timings[@]}"
printf '%5d s  total\n' $((SECONDS - started))
echo "deploy: idle RSS under qemu-user (emulator included, so above the native figure):"
python3 - <<'EOF'
import json
for name in ("aarch64", "armv7"):
    s = json.load(open(f"target/deploy/smoke-{name}.json"))
    print(f"  {name}: {s['idle_rss_kib']} KiB; MQTT->STOMP: {s['mqtt_to_stomp']}")
EOF
echo "deploy: passed"
