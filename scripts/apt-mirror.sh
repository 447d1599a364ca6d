#!/bin/sh
# apt-mirror.sh debian|debian-security - prints the URL of the Debian mirror
# apt is configured with (deb822 .sources or one-line sources.list), one per
# source file that names one, so debootstrap goes where apt is known to work.
set -eu
kind=$1
for f in /etc/apt/sources.list.d/*.sources; do
  [ -r "$f" ] || continue
  awk -v kind="$kind" '
    /^URIs:/ { for (i = 2; i <= NF; i++) { u = $i; sub(/\/+$/, "", u); n = split(u, p, "/"); if (p[n] == kind) { print u; exit } } }' "$f"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -r "$f" ] || continue
  awk -v kind="$kind" '
    $1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { u = $i; break }
                  sub(/\/+$/, "", u); n = split(u, p, "/"); if (p[n] == kind) { print u; exit } }' "$f"
done
