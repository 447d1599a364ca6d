#!/bin/sh
# run.sh - `make fresh-test`: the README's quick start on a new Debian 12.
#
# Makes a minimal root (`debootstrap --variant=minbase bookworm`), adds only
# make, gcc, git, curl and ca-certificates, clones this repository's committed
# tree into it and runs, as root in a clean environment, the README's two
# commands: `make test`, then `make run` with a readiness probe on
# 127.0.0.1:8080 and one tile request. From the host the root gets only the
# machine's network setup: /etc/resolv.conf, apt's sources and Acquire
# settings, the local CA certificates and /etc/pip.conf; /etc/hosts is written
# as Debian's installer writes it.
#
#   sh tests/fresh/run.sh              the commit checked out here (HEAD)
#   FRESH_REF=main sh tests/fresh/run.sh
#   FRESH_KEEP=1 sh tests/fresh/run.sh keeps the root (its path is printed)
#
# Needs root (debootstrap, chroot, mounts) and the network; installs
# debootstrap with apt when missing. Takes about 6 minutes on 2 cores; not
# part of `make test`. Mounts are made in private mount namespaces, so they
# end with the commands that use them; `make run` runs in its own network
# namespace, where 127.0.0.1:8080 is free whatever the host serves there.
set -eu
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "fresh: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
src=$(pwd)
commit=$(git rev-parse --verify "${FRESH_REF:-HEAD}^{commit}")
t0=$(date +%s)
mark=$t0
step() { # step TEXT: prints the time since the start and since the previous step
  now=$(date +%s)
  echo "fresh: [$((now - t0))s total, $((now - mark))s step] $*"
  mark=$now
}

if ! command -v debootstrap >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap >/dev/null
fi
work=$(mktemp -d /var/tmp/tiled-fresh.XXXXXX)
root=$work/root

# Processes still running in the root (a daemon a failed test left behind).
kill_leftovers() {
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  return 0
}
cleanup() {
  kill_leftovers
  if grep -q " $root/" /proc/mounts; then
    echo "fresh: mounts remain under $root, left in place" >&2
  elif [ -n "${FRESH_KEEP:-}" ]; then
    echo "fresh: root kept in $root"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# in_root [UNSHARE-OPTION...] -- SCRIPT: SCRIPT run by sh in the root, as root
# with a new login's environment, /proc, /sys and /dev mounted for it only.
in_root() {
  opts=""
  while [ "$1" != -- ]; do opts="$opts $1"; shift; done
  shift
  # shellcheck disable=SC2086
  unshare --mount --propagation private $opts sh -c '
    set -e
    [ -z "$3" ] || ip link set lo up
    mount -t proc proc "$1/proc"
    mount --rbind /sys "$1/sys"
    mount --rbind /dev "$1/dev"
    exec chroot "$1" /usr/bin/env -i HOME=/root TERM=dumb \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/sh -c "$2"' \
    fresh "$root" "$1" "$(case "$opts" in *--net*) echo net ;; esac)"
}

mirror=$(sh scripts/apt-mirror.sh debian | head -n 1)
mirror=${mirror:-http://deb.debian.org/debian}
step "debootstrap --variant=minbase bookworm from $mirror into $root"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$work/debootstrap.log" 2>&1 ||
  { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }

step "the host's network setup: resolv.conf, apt sources and Acquire settings, CA certificates, pip.conf"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# A Debian installation has /etc/hosts (its installer writes it; no package
# owns the file, so debootstrap leaves it out): localhost resolves without
# DNS, as chromedriver's client (tests/server/test_browser.py) needs.
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$root/etc/hosts"
rm -f "$root/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -r "$f" ] || continue
  mkdir -p "$root$(dirname "$f")" && cp "$f" "$root$f"
  # The keyrings the sources are signed with, when the new root lacks them.
  for k in $(sed -n 's/.*[Ss]igned-[Bb]y[:=] *\([^] ]*\).*/\1/p' "$f"); do
    [ -e "$root$k" ] || { mkdir -p "$root$(dirname "$k")" && cp "$k" "$root$k"; }
  done
done
for f in /etc/apt/apt.conf.d/*; do
  grep -qs 'Acquire' "$f" && cp "$f" "$root/etc/apt/apt.conf.d/"
done
[ -r /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
mkdir -p "$root/usr/local/share/ca-certificates"
cp -R /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
# Without an init, package scripts would start services (nginx) right in the
# host's network; a chroot forbids that as a container image does.
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

step "apt-get install make gcc git curl ca-certificates"
in_root -- 'export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends make gcc git curl ca-certificates >/dev/null
  update-ca-certificates >/dev/null' > "$work/base.log" 2>&1 || { tail -n 20 "$work/base.log" >&2; exit 1; }

step "git clone of $commit"
git clone -q --no-hardlinks "$src" "$root/root/tiled"
git -C "$root/root/tiled" checkout -q "$commit"

step "make test"
{ st=0; in_root -- 'cd /root/tiled && make test' 2>&1 || st=$?; echo "$st" > "$work/test.status"; } | tee "$work/make-test.log"
test_status=$(cat "$work/test.status")
test_secs=$(( $(date +%s) - mark ))
step "make test exited $test_status"
kill_leftovers

step "make run, probed on 127.0.0.1:8080"
in_root --net -- '
  cd /root/tiled
  setsid make run > /root/make-run.log 2>&1 &
  pid=$!
  i=0
  until curl -sf http://127.0.0.1:8080/v2/health/ready > /dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "fresh: make run did not become ready"; tail -n 30 /root/make-run.log; kill -TERM -"$pid" 2>/dev/null; exit 1
    fi
    sleep 0.2
  done
  echo "fresh: ready: $(curl -s -w " %{http_code}" http://127.0.0.1:8080/v2/health/ready)"
  out=$(curl -s http://127.0.0.1:8080/v1/tile -H "Content-Type: application/json" \
    -d "{\"input\": {\"dtype\": \"int32\", \"data\": [1, 2]}, \"repeats\": [3]}")
  echo "fresh: tile: $out"
  kill -TERM -"$pid"
  wait "$pid" || true
  tail -n 4 /root/make-run.log
  # Both addresses printed, as the quick start says: HTTP on 8080, gRPC on 8081.
  grep -qx "listening on http://127.0.0.1:8080" /root/make-run.log &&
    grep -qx "listening on grpc://127.0.0.1:8081" /root/make-run.log || { echo "fresh: make run did not print both addresses"; exit 1; }
  case "$out" in *"[1,2,1,2,1,2]"*) ;; *) exit 1 ;; esac' && run_status=0 || run_status=$?
step "make run exited $run_status"

echo "fresh: make test: $(grep '^suites: ' "$work/make-test.log" | tail -n 1) (exit $test_status, ${test_secs}s)"
echo "fresh: make run: $([ "$run_status" = 0 ] && echo ready and answered || echo FAILED)"
npass=0 nfail=0
for s in "$test_status" "$run_status"; do
  if [ "$s" = 0 ]; then npass=$((npass + 1)); else nfail=$((nfail + 1)); fi
done
echo "fresh: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
