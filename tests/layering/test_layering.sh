#!/bin/sh
# test_layering.sh - the layers are kept apart by the build, not by habit.
# Bottom up: core/ < api/ < server/infra/ < server/tls/ < server/service/
# < server/handlers/ < the transports server/http/ and server/grpc/ (side
# by side, neither seeing the other) < server/*.c (the daemon) < cli/:
#   - a wrong-way #include does not compile with the include path the
#     Makefile gives that layer (each server/ folder its own), and a
#     right-way one does (so the failure is the layering, not a broken
#     probe); include_graph.py knows the same paths;
#   - the modules' include graph has no cycle, nor has their symbol graph
#     (a function named in module A and defined in module B: A depends on
#     B, whatever header declares it; include_graph.py), and no object
#     uses a symbol defined in a higher layer or in the other transport;
#     the checker finds a planted cycle in each graph, and a planted
#     infra -> service and http -> grpc call;
#   - no object defines a function a library the daemon links exports
#     (`nm` of the objects against `nm -D` of what `ldd` lists): the
#     libraries are used through their APIs, not interposed; the checker
#     finds a planted recv();
#   - no code includes microhttpd.h, only server/grpc/ nghttp2, only
#     server/tls/ GnuTLS;
#   - no file name is used twice under core/, api/ and server/;
#   - a reply has room for every header name the code sets;
#   - the CLI links without server/ (BUILD/tiled-cli) and says so for serve
#     and for https probes (TLS is reached through a weak symbol of server/tls/).
#
#   sh tests/layering/test_layering.sh [BUILD]     (run by make test-unit)
set -u
build=${1:-build}
make=${MAKE:-make}
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tiled-layering.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# probe LAYER HEADER want: compile `#include "HEADER"` with LAYER's flags.
probe() {
  flags=$($make -s --no-print-directory layer-flags LAYER="$1")
  printf '#include "%s"\nint layer_probe(void);\nint layer_probe(void) { return 0; }\n' "$2" > "$tmp/probe.c"
  if ${CC:-cc} $flags -std=c11 -c "$tmp/probe.c" -o "$tmp/probe.o" 2> "$tmp/err"; then got=compiles; else got=fails; fi
  if [ "$got" = "$3" ]; then ok; else bad "$1/ including \"$2\" $got (want: $3)"; sed 3q "$tmp/err" >&2; fi
}

probe core tile.h compiles
probe core encode.h fails      # core must not see api/
probe core server.h fails
probe api encode.h compiles
probe api tile.h compiles
probe api server.h fails       # api must not see server/
probe api cli.h fails
probe cli encode.h compiles
probe cli server.h fails       # the CLI does not depend on the daemon
probe cli serve.h fails
probe server encode.h compiles
probe server cli.h fails       # nor the daemon on the CLI
# Within server/, each folder sees its own layer and those below.
probe infra config.h compiles
probe infra tile.h compiles
probe infra service.h fails    # infrastructure does not know the service
probe infra reply.h fails      # nor write its replies
probe infra route.h fails
probe infra tls.h fails
probe tls log.h compiles
probe tls service.h fails
probe service log.h compiles   # the service uses infrastructure
probe service tls.h compiles
probe service router.h fails   # the route table is above it (wired by serve.c)
probe service v2_catalog.h fails
probe service handlers.h fails
probe handlers service.h compiles
probe handlers metrics.h compiles
probe handlers http.h fails    # handlers know no transport
probe handlers grpc.h fails
probe http router.h compiles
probe http grpc.h fails        # nor does one transport know the other
probe http serve.h fails
probe grpc service.h compiles
probe grpc http.h fails
probe grpc h1wire.h fails
probe grpc serve.h fails
probe server http.h compiles   # the daemon wires them all
probe server grpc.h compiles
probe server router.h compiles

# include_graph.py resolves includes with the Makefile's paths.
for layer in core api cli infra tls service handlers http grpc server; do
  want=$($make -s --no-print-directory layer-flags LAYER="$layer" CPPFLAGS=)
  got=$(python3 tests/layering/include_graph.py --layer-path "$layer")
  if [ "$got" = "$want" ]; then ok; else bad "include_graph.py's path of $layer is '$got', the Makefile's '$want'"; fi
done

if python3 tests/layering/include_graph.py .; then ok; else bad "the include graph has a cycle"; fi
# The same of the functions and objects each module's object names and
# which module defines them, whatever header declares them; and each
# object's against the layers: nothing used from above or across; and no
# function a library the daemon links exports defined by the project
# (interposition: the self-test plants a recv()).
if python3 tests/layering/include_graph.py --symbols "$build" .; then ok; else
  bad "the symbol graph has a cycle, code reaches up or across the transports, or defines a library's function"; fi
if python3 tests/layering/include_graph.py --self-test; then ok; else
  bad "the checker missed a planted cycle or upward call"; fi

# Each transport's library is known to its directory only: nghttp2 to
# server/grpc/, GnuTLS to server/tls/ (the policy and certificate both
# ports share, and the sessions both ports' loops read through,
# tls/session.h). HTTP/1.1 is the project's own (server/http/): no code
# includes libmicrohttpd's header.
only_in() { # only_in HEADER_REGEX DIR...
  re=$1
  shift
  others=$(grep -rlE "#include *<$re" core api cli server)
  for d in "$@"; do
    others=$(printf '%s\n' "$others" | grep -v "^$d/")
    grep -rlqE "#include *<$re" "$d" || others="$others (none in $d/)"
  done
  if [ -z "$others" ]; then ok; else bad "$re included outside $*: $others"; fi
}
only_in 'microhttpd\.h'
only_in 'nghttp2/' server/grpc
only_in 'gnutls/' server/tls

# A file's name says what it holds, once: no two sources of the library
# and the daemon share a name (api/v2.c and a server/ v2.c were two rooms
# with one sign).
dups=$(find core api server -name '*.[ch]' | sed 's|.*/||' | sort | uniq -d | tr '\n' ' ')
if [ -z "$dups" ]; then ok; else bad "file names used twice under core/, api/ and server/: $dups"; fi

# A reply holds TILED_REPLY_HEADERS headers, one per name (a name set again
# replaces its value): more than the names the code sets, each a literal
# at every call, so no reply turns one away.
calls=$(grep -rhoE 'tiled_reply_header\([^,]+,[^,]+,' server --include='*.c' | grep -v 'const char \*name')
names=$(printf '%s\n' "$calls" | sed -nE 's/.*, *("[A-Za-z-]+"),$/\1/p' | sort -u)
cap=$(sed -n 's/^#define TILED_REPLY_HEADERS \([0-9]*\).*/\1/p' server/service/reply.h)
count=$(printf '%s\n' "$names" | grep -c .)
if [ "$(printf '%s\n' "$calls" | grep -c .)" -eq "$(printf '%s\n' "$calls" | grep -cE ', *("[A-Za-z-]+"),$')" ] &&
   [ -n "$cap" ] && [ "$count" -gt 10 ] && [ "$count" -lt "$cap" ]; then ok; else
  bad "reply header names: $count named (every call a literal?) against TILED_REPLY_HEADERS ${cap:-unset}"; fi

cli="$build/tiled-cli"
if [ -x "$cli" ] && "$cli" tile --help | grep -q -- "--repeats"; then ok; else bad "$cli tile --help"; fi
"$cli" serve > "$tmp/out" 2>&1
if [ $? -eq 2 ] && grep -q "no HTTP daemon" "$tmp/out"; then ok; else bad "$cli serve should say it has no daemon"; fi
if nm "$cli" | grep -q ' T tiled_http_start'; then bad "$cli links server code"; else ok; fi
"$cli" probe --insecure https://127.0.0.1:1/ > "$tmp/out" 2>&1
if [ $? -eq 2 ] && grep -q "this build has no TLS" "$tmp/out"; then ok; else bad "$cli probe https:// should say it has no TLS"; fi

echo "layering: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
