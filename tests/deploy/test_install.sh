#!/bin/sh
# Installs into a temporary DESTDIR and builds a small C program against the
# installed core with pkg-config, then runs it.
set -eu
stage=$(mktemp -d /tmp/tiled-install.XXXXXX)
trap 'rm -rf "$stage"' EXIT
make -s install PREFIX=/usr/local DESTDIR="$stage" >/dev/null
for f in bin/tiled share/man/man1/tiled.1 lib/libtile.a lib/libtile.so.0 include/tiled/tile.h lib/pkgconfig/tile.pc; do
  [ -e "$stage/usr/local/$f" ] || { echo "missing $f"; echo "0 passed, 1 failed"; exit 1; }
done
cat > "$stage/demo.c" <<'C'
#include <stdio.h>
#include <tile.h>
int main(void)
{
    const float in[4] = {1, 2, 3, 4};
    const int64_t shape[2] = {2, 2}, rep[2] = {1, 2};
    float out[8];
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = rep, .nrepeats = 2};
    struct tile_plan plan;
    struct tile_error err = {0};
    if (tile_plan_init(&plan, TILE_FLOAT32, 2, shape, &spec, &err) < 0)
        return 1;
    tile_execute(&plan, in, out, NULL);
    for (int i = 0; i < 8; i++)
        printf("%g%s", out[i], i < 7 ? " " : "\n");
    return 0;
}
C
export PKG_CONFIG_PATH="$stage/usr/local/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
# shellcheck disable=SC2046
cc -std=c11 -o "$stage/demo" "$stage/demo.c" $(pkg-config --cflags --libs tile)
got=$(LD_LIBRARY_PATH="$stage/usr/local/lib" "$stage/demo")
# shellcheck disable=SC2046
cc -std=c11 -o "$stage/demo-static" "$stage/demo.c" $(pkg-config --cflags tile) "$stage/usr/local/lib/libtile.a" -pthread
got_static=$("$stage/demo-static")
want="1 2 1 2 3 4 3 4"
pass=0
fail=0
check() { # check WHAT COMMAND...: counts whether COMMAND succeeds; a failure says WHAT
  what=$1
  shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "install: FAIL: $what"; fi
}
check "the program linked with libtile.so prints '$got', want '$want'" [ "$got" = "$want" ]
check "the program linked with libtile.a prints '$got_static', want '$want'" [ "$got_static" = "$want" ]
if command -v man >/dev/null 2>&1; then
  man -l "$stage/usr/local/share/man/man1/tiled.1" > "$stage/man.out" 2>&1
  check "man -l renders the installed tiled.1: $(head -c 300 "$stage/man.out")" grep -q "tiled serve" "$stage/man.out"
else
  check "man is not installed (Debian: man-db; make deps), so tiled.1 was not rendered" false
fi
echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
