#!/bin/sh
# image.sh - `make image`: builds the tiled container image from ./Dockerfile.
#
# Engine (TILED_IMAGE_ENGINE=auto|docker|podman|buildah, default auto):
#   docker   when `docker info` reaches a daemon;
#   buildah  otherwise: daemonless, chroot isolation, host network, so it
#            works inside containers without a daemon too; storage driver
#            from deploy/storage.sh (overlay when it works, else vfs).
#            Installs buildah, podman, runc (and debootstrap) with apt when
#            missing.
#   podman   only when asked for; `podman build` with the same options.
#
# With buildah or podman, a missing debian:bookworm-slim is not pulled from a
# registry but made locally: `debootstrap --variant=minbase bookworm` from the
# mirror apt already uses, slimmed like the official image (no docs, man
# pages or locales), cached as build-image/bookworm-slim.tar and imported as
# docker.io/library/debian:bookworm-slim. TILED_IMAGE_BASE=pull pulls instead.
#
# Other settings: TILED_IMAGE (default tiled:latest), TILED_DEBIAN_MIRROR,
# TILED_STORAGE_DRIVER (overlay or vfs). Prints the build time and size.
set -eu
cd "$(dirname "$0")/.." || exit 1

IMAGE=${TILED_IMAGE:-tiled:latest}
ENGINE=${TILED_IMAGE_ENGINE:-auto}
BASE_MODE=${TILED_IMAGE_BASE:-debootstrap}
CACHE=build-image
BASE_REF=docker.io/library/debian:bookworm-slim
BASE_TAR=$CACHE/bookworm-slim.tar
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

log() { echo "image: $*"; }

apt_install() {
  missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "image: missing packages:$missing (apt-get install$missing)" >&2
    exit 1
  fi
  log "installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# The Debian mirror apt is configured with, so debootstrap goes where apt is
# known to work.
apt_mirror() { sh scripts/apt-mirror.sh "$1"; }

make_base_tar() {
  [ -s "$BASE_TAR" ] && { log "base rootfs cached: $BASE_TAR"; return 0; }
  apt_install debootstrap
  mirror=${TILED_DEBIAN_MIRROR:-$(apt_mirror debian | head -n 1)}
  mirror=${mirror:-http://deb.debian.org/debian}
  security=$(apt_mirror debian-security | head -n 1)
  security=${security:-http://deb.debian.org/debian-security}
  root=$CACHE/rootfs
  rm -rf "$root"
  mkdir -p "$CACHE"
  log "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" > "$CACHE/debootstrap.log" 2>&1 || {
    tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
  # What the official slim image does: no docs, man pages or translations,
  # now or for packages installed later; apt cleans up after itself.
  cat > "$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  cat > "$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' > "$root/etc/apt/apt.conf.d/docker-no-languages"
  echo 'APT::AutoRemove::SuggestsImportant "false";' > "$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
  rm -f "$root/etc/apt/sources.list"
  cat > "$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  rm -rf "${root:?}"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
         "$root"/usr/share/groff/* "$root"/usr/share/lintian/* \
         "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
         "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/var/cache/debconf/*-old \
         "${root:?}"/dev/* "$root"/proc/* "$root"/sys/* "$root"/run/* "$root"/tmp/*
  : > "$root/etc/machine-id"
  tar --numeric-owner --xattrs -C "$root" -cf "$BASE_TAR.tmp" .
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  rm -rf "$root"
  log "base rootfs: $BASE_TAR ($(du -h "$BASE_TAR" | cut -f1))"
}

# $1 = command prefix of the engine that owns the store (buildah or podman).
ensure_base() {
  if [ "$BASE_MODE" = pull ]; then
    return 0
  fi
  if $1 inspect --type image "$BASE_REF" >/dev/null 2>&1; then
    log "base image present: $BASE_REF"
    return 0
  fi
  t=$(date +%s)
  make_base_tar
  log "importing $BASE_TAR as $BASE_REF"
  ctr=$(buildah --storage-driver "$DRIVER" from --pull=never scratch)
  buildah --storage-driver "$DRIVER" add "$ctr" "$BASE_TAR" / >/dev/null
  buildah --storage-driver "$DRIVER" config --cmd bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  buildah --storage-driver "$DRIVER" commit --quiet --rm "$ctr" "$BASE_REF" >/dev/null
  log "base image ready in $(($(date +%s) - t)) s"
}

engine=$ENGINE
if [ "$engine" = auto ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    engine=docker
  else
    engine=buildah
  fi
fi

start=$(date +%s.%N)
case "$engine" in
  docker)
    log "building $IMAGE with docker"
    bstart=$(date +%s.%N)
    docker build --build-arg GIT_COMMIT="$COMMIT" -t "$IMAGE" .
    size=$(docker image inspect --format '{{.Size}}' "$IMAGE")
    ;;
  buildah)
    # podman and runc are for `make image-test` (podman run) and the size.
    apt_install buildah podman runc
    DRIVER=$(sh deploy/storage.sh)
    ensure_base "buildah --storage-driver $DRIVER"
    pull=--pull=never
    [ "$BASE_MODE" = pull ] && pull=--pull=true
    log "building $IMAGE with buildah (chroot isolation, $DRIVER storage driver, host network)"
    bstart=$(date +%s.%N)
    buildah --storage-driver "$DRIVER" bud --isolation chroot --network host --format docker \
      --layers "$pull" --build-arg GIT_COMMIT="$COMMIT" -t "$IMAGE" .
    # buildah inspect has no image size; podman reads the same store.
    size=$(podman --storage-driver "$DRIVER" image inspect --format '{{.Size}}' "$IMAGE" 2>/dev/null || echo 0)
    ;;
  podman)
    apt_install podman buildah runc
    DRIVER=$(sh deploy/storage.sh)
    ensure_base "podman --storage-driver $DRIVER"
    pull=--pull=never
    [ "$BASE_MODE" = pull ] && pull=--pull=true
    log "building $IMAGE with podman"
    bstart=$(date +%s.%N)
    podman --storage-driver "$DRIVER" build --isolation chroot --network host --format docker \
      --layers "$pull" --build-arg GIT_COMMIT="$COMMIT" -t "$IMAGE" .
    size=$(podman --storage-driver "$DRIVER" image inspect --format '{{.Size}}' "$IMAGE")
    ;;
  *) echo "image: unknown engine '$engine' (docker, podman or buildah)" >&2; exit 2 ;;
esac
end=$(date +%s.%N)
awk -v s="$start" -v bs="$bstart" -v e="$end" -v b="$size" -v img="$IMAGE" -v eng="$engine" \
  'BEGIN { printf "image: %s built with %s in %.1f s (%.1f s in all), %.1f MB\n", img, eng, e - bs, e - s, b / 1e6 }'
