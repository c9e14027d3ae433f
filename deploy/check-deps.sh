#!/usr/bin/env bash
# Fails when any workspace dependency, for either Raspberry Pi target, needs OpenSSL or aws-lc
# (C libraries that break or bloat the cross build; TLS is rustls with the ring provider).
#   1. `cargo tree -i openssl-sys` and `cargo tree -i aws-lc-sys`: the package must not be in
#      the graph at all (all edge kinds: normal, build and dev).
#   2. `cargo tree -e normal`: no crate whose name mentions ssl or aws (rustls does not match).
#      One exception: openssl-probe, pure Rust with no C and no OpenSSL, which only looks for
#      the system's CA files (rustls-native-certs uses it: the bridges trust the system's
#      certificates when no ca_file is given).
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
for target in aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf; do
  for crate in openssl-sys aws-lc-sys; do
    if out=$(cargo tree --workspace --target "$target" -i "$crate" 2>&1); then
      # Exit 0 means the package is in the lock file; it must still not be reachable.
      if grep -q "^$crate v" <<<"$out"; then
        echo "check-deps: $crate is needed for $target:"; echo "$out"; status=1
      fi
    elif ! grep -q 'did not match any packages' <<<"$out"; then
      echo "check-deps: cargo tree -i $crate --target $target failed:"; echo "$out"; status=1
    fi
  done
  tree=$(cargo tree --workspace --target "$target" -e normal --prefix none)
  if hits=$(grep -Ei 'ssl|aws' <<<"$tree" | grep -v '^openssl-probe v' | sort -u) && [[ -n $hits ]]; then
    echo "check-deps: crates mentioning ssl/aws in the normal dependencies for $target:"; echo "$hits"; status=1
  fi
  [[ $status -eq 0 ]] && echo "check-deps: $target: no openssl, no aws-lc"
done
exit $status
