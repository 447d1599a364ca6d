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
if [ "$got" = "$want" ] && [ "$got_static" = "$want" ] && man -l "$stage/usr/local/share/man/man1/tiled.1" >/dev/null 2>&1; then
  echo "install: 3 passed, 0 failed"
else
  echo "install: got '$got' / '$got_static', want '$want'"
  echo "install: 0 passed, 3 failed"
  exit 1
fi
