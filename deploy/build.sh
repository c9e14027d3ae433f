#!/usr/bin/env bash
# Cross-builds the tolk release binary for the Raspberry Pi on a Debian 12 (x86_64) machine:
#   target/aarch64-unknown-linux-gnu/release/tolk       64-bit Raspberry Pi OS / Debian arm64
#   target/armv7-unknown-linux-gnueabihf/release/tolk   32-bit Raspberry Pi OS / Debian armhf
# Installs what is missing first: Debian's cross gcc (the linkers named in .cargo/config.toml)
# with apt-get (as root, or through sudo), and the two Rust targets with rustup.
#
#   deploy/build.sh                  # both targets
#   deploy/build.sh aarch64-unknown-linux-gnu
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)

# Installs Debian packages that are not installed yet (apt-get update first, once).
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

packages=(lld-16)
for t in "${targets[@]}"; do
  case "$t" in
    aarch64-unknown-linux-gnu)     packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross) ;;
    armv7-unknown-linux-gnueabihf) packages+=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross) ;;
    *) echo "build.sh: unsupported target $t" >&2; exit 2 ;;
  esac
done
apt_install "${packages[@]}"

installed=$(rustup target list --installed)
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

# Linked by LLVM's lld 16 (Debian package lld-16) with identical code folding: generic code that
# compiles to the same machine code for several types is kept once, about 0.1 MB off each
# binary at no cost at run time. Relative relocations are packed (DT_RELR, `-z
# pack-relative-relocs`, lld 15 and later): the position-independent binary keeps its ASLR and
# its relocation table shrinks from about 280 KB to a few KB. The loader must know DT_RELR:
# glibc 2.36 (Debian 12, Raspberry Pi OS bookworm) and later; the binary says so with a
# GLIBC_ABI_DT_RELR dependency, and the package with `libc6 (>= 2.36)` (docs/deploy-pi.md,
# "Binary size"). A cross gcc looks for `ld.lld` in its -B directories, not on PATH, hence the
# directory of one link.
mkdir -p target/lld
ln -sf "$(command -v ld.lld-16)" target/lld/ld.lld
lld_flags="-Clink-arg=-fuse-ld=lld -Clink-arg=-B$PWD/target/lld -Clink-arg=-Wl,--icf=all"
lld_flags+=" -Clink-arg=-Wl,-z,pack-relative-relocs"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS=$lld_flags
export CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_RUSTFLAGS=$lld_flags

# One cargo run for all targets: the host's build scripts and proc-macros are built once, and
# the two single-threaded fat-LTO links run side by side on two cores.
echo "building tolk for ${targets[*]}"
# Without the cluster for now: with it the binary is over the 8 MB budget (docs/deploy-pi.md,
# "Binary size"). A `[cluster]` table is then refused at start with that reason.
cargo build --release -p tolk --no-default-features "${targets[@]/#/--target=}"
for t in "${targets[@]}"; do ls -l "target/$t/release/tolk"; done
