#!/usr/bin/env bash
# Builds the tolk .deb for one ARM target from an already built release binary, with plain
# dpkg-deb from a staging tree (no cargo-deb: it would cost a compile in CI and add nothing
# that these few lines do not do).
#
#   deploy/package.sh aarch64-unknown-linux-gnu        # -> target/deb/tolk_<ver>-1_arm64.deb
#   deploy/package.sh armv7-unknown-linux-gnueabihf    # -> target/deb/tolk_<ver>-1_armhf.deb
#
# The package installs /usr/bin/tolk, /lib/systemd/system/tolk.service and the gateway
# config /etc/tolk/tolk.toml (a conffile). That config is generated here from the binary's own
# `--print-default-config`, with only data_dir changed to /var/lib/tolk, so it never drifts
# from the defaults. The binary runs under qemu-user for that (Debian package qemu-user).
# Environment: DEB_REVISION (default 1), SOURCE_DATE_EPOCH (default: last commit time).
set -euo pipefail
cd "$(dirname "$0")/.."

triple=${1:?usage: deploy/package.sh <aarch64-unknown-linux-gnu|armv7-unknown-linux-gnueabihf>}
case "$triple" in
  aarch64-unknown-linux-gnu)     arch=arm64; gnu=aarch64-linux-gnu;   qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu) ;;
  armv7-unknown-linux-gnueabihf) arch=armhf; gnu=arm-linux-gnueabihf; qemu=(qemu-arm -L /usr/arm-linux-gnueabihf) ;;
  *) echo "package.sh: unknown target $triple" >&2; exit 2 ;;
esac
binary=target/$triple/release/tolk
[[ -x $binary ]] || { echo "package.sh: $binary is missing: run deploy/build.sh first" >&2; exit 2; }

version=$("${qemu[@]}" "$binary" --version | awk '{print $2}')
debversion="$version-${DEB_REVISION:-1}"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

out=target/deb
stage=$out/stage-$arch
rm -rf "$stage"
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" "$stage/etc/tolk" \
  "$stage/usr/share/doc/tolk"

install -m 0755 "$binary" "$stage/usr/bin/tolk"
install -m 0644 deploy/tolk.service "$stage/lib/systemd/system/tolk.service"
install -m 0644 deploy/debian/copyright "$stage/usr/share/doc/tolk/copyright"
install -m 0644 docs/deploy-pi.md "$stage/usr/share/doc/tolk/deploy-pi.md"

# The gateway config: the defaults, with data_dir in systemd's StateDirectory.
config=$stage/etc/tolk/tolk.toml
"${qemu[@]}" "$binary" --print-default-config > "$out/default-$arch.toml"
sed 's|^data_dir = .*$|data_dir = "/var/lib/tolk"|' "$out/default-$arch.toml" > "$config"
changed=$(diff "$out/default-$arch.toml" "$config" | grep -c '^>' || true)
[[ $changed == 1 ]] || { echo "package.sh: expected to change exactly one line (data_dir), changed $changed" >&2; exit 1; }
grep -qx 'data_dir = "/var/lib/tolk"' "$config"
"${qemu[@]}" "$binary" --config "$config" --check-config >/dev/null
chmod 0644 "$config"
cp "$config" "$out/tolk.toml"   # the same file beside the packages, for a look or a manual install

# The lowest glibc the binary runs on, from its versioned dynamic symbols.
glibc=$("$gnu-objdump" -T "$binary" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1)
[[ -n $glibc ]] || { echo "package.sh: no GLIBC symbol versions found in $binary" >&2; exit 1; }
# Packed relative relocations (deploy/build.sh) need a loader that reads DT_RELR: glibc 2.36.
if "$gnu-objdump" -p "$binary" | grep -q 'GLIBC_ABI_DT_RELR'; then
  glibc=$(printf '%s\n2.36\n' "$glibc" | sort -V | tail -n1)
fi

install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$stage/DEBIAN/"
echo /etc/tolk/tolk.toml > "$stage/DEBIAN/conffiles"
installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: tolk
Version: $debversion
Architecture: $arch
Maintainer: tolk developers <tolk@example.invalid>
Installed-Size: $installed_size
Depends: libc6 (>= $glibc), adduser
Section: net
Priority: optional
Homepage: https://example.invalid/tolk
Description: multi-protocol IoT broker (MQTT, MQTT-SN, STOMP, AMQP, WS-Notification, XMPP)
 tolk lets publishers and subscribers that speak different pub/sub protocols
 share one topic space: MQTT 3.1.1/5, MQTT-SN 1.2, STOMP 1.2, AMQP 0.9.1 and
 SOAP WS-Notification. It runs as a systemd service (user tolk, state in
 /var/lib/tolk, configuration in /etc/tolk/tolk.toml) and serves Prometheus
 metrics, including per-hop latency histograms per protocol pair, on :8080.
EOF
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum > DEBIAN/md5sums)
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"
find "$stage" -type d -exec chmod 0755 {} +
find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

deb=$out/tolk_${debversion}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
