#!/bin/sh
# storage.sh - prints the containers/storage driver for buildah and podman:
# TILED_STORAGE_DRIVER when set; else the driver the store already uses;
# else overlay when a scratch overlay mount works here (fast layers and
# cleanup), otherwise vfs (plain copies: slower, works everywhere).
# Used by deploy/image.sh and tests/deploy/test_image.sh.
set -eu
if [ -n "${TILED_STORAGE_DRIVER:-}" ]; then
  echo "$TILED_STORAGE_DRIVER"
  exit 0
fi
graph=/var/lib/containers/storage
[ "$(id -u)" = 0 ] || graph=${XDG_DATA_HOME:-$HOME/.local/share}/containers/storage
for d in overlay vfs; do
  if [ -d "$graph/$d-images" ]; then
    echo "$d"
    exit 0
  fi
done
probe=$(mktemp -d "${TMPDIR:-/tmp}/tiled-storage.XXXXXX")
B="buildah --root $probe/root --runroot $probe/run --storage-driver overlay"
driver=vfs
if ctr=$($B from --pull=never scratch 2>/dev/null); then
  mnt=$($B mount "$ctr" 2>/dev/null) && touch "$mnt/probe" 2>/dev/null && driver=overlay
  $B rm "$ctr" >/dev/null 2>&1 || true
fi
umount -R "$probe/root/overlay" 2>/dev/null || true
rm -rf "$probe" 2>/dev/null || true
echo "$driver"
