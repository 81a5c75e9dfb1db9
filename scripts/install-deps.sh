#!/bin/sh
# Install the Debian 12 packages powerfs needs.  Skips the whole step when
# everything is present, so `make check` stays quick.
#   --run  only what building and running powerfs needs (`make run`)
#   (none) that and what the tests need (`make check`)
#   --vm   that and what `make check-vm` needs: qemu (software emulation),
#          mmdebstrap to build the Debian 12 guest, mke2fs for its disks.
set -eu
RUN_PKGS="gcc make pkg-config libfuse3-dev fuse3 libglib2.0-dev libsystemd-dev"
PKGS="$RUN_PKGS python3 python3-pytest python3-dbusmock dbus"
# Container tests (tests/test_lxc.py, tests/test_nspawn.py).
PKGS="$PKGS lxc busybox-static uidmap systemd-container"
# scripts/check-under-load: make check beside two CPU hogs.
PKGS="$PKGS stress-ng"
# powerfs-report's test renders its HTML in a real browser.
PKGS="$PKGS chromium fonts-dejavu-core"
# tests/test_metrics.py scrapes --metrics-dir's file through node_exporter.
PKGS="$PKGS prometheus-node-exporter"
PKGS="$PKGS clang"
# tests/test_man.py renders every man page with man --warnings.
PKGS="$PKGS man-db"
# make lint
PKGS="$PKGS clang-format shellcheck python3-pyflakes"
VM_PKGS="qemu-system-x86 mmdebstrap e2fsprogs debian-archive-keyring"
case "${1:-}" in
--run) PKGS=$RUN_PKGS ;;
--vm) PKGS="$PKGS $VM_PKGS" ;;
"") ;;
*) echo "usage: $0 [--run|--vm]" >&2; exit 2 ;;
esac
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# $missing is a list of package names: split on purpose.
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
