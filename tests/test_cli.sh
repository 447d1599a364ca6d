#!/bin/sh
# test_cli.sh - `tiled tile` checked against numpy.tile (and, for ONNX
# Tile-1, numpy.concatenate along the axis) on .npy files of many dtypes,
# byte orders and memory orders; stdin/stdout; error exits; valgrind.
#
#   TILED_BIN=build/tiled sh tests/test_cli.sh
#
# Needs /usr/bin/python3 with numpy (Debian: python3-numpy) and valgrind.
set -u
: "${TILED_BIN:=build/tiled}"
PY=/usr/bin/python3
pass=0
fail=0

if [ ! -x "$TILED_BIN" ]; then
  echo "test_cli.sh: $TILED_BIN is not an executable (build it with make)" >&2
  exit 1
fi
if ! $PY -c 'import numpy' 2>/dev/null; then
  echo "test_cli.sh: $PY cannot import numpy (apt-get install python3-numpy)" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tiled-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# check.py gen PATH EXPR            saves eval(EXPR) with numpy.save
# check.py check OUT IN tile R      OUT must equal numpy.tile(IN, R)
# check.py check OUT IN concat N K  OUT must be N copies of IN along axis K
cat >"$tmp/check.py" <<'EOF'
import sys
import numpy as np

def load(path):
    return np.load(path, allow_pickle=False)

def header(path):
    """fortran_order and the data offset, read by numpy's own header reader."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        _, fortran, _ = read(f)
        return fortran, f.tell()

def expected(a, mode, x, y):
    if mode == "tile":
        return np.tile(a, [int(v) for v in x.split(",")] if x else [])
    tiles, axis = int(x), int(y)
    if tiles == 0:
        return np.take(a, np.array([], dtype=np.intp), axis=axis)
    return np.concatenate([a] * tiles, axis=axis)

def check(out, inp, mode, x, y):
    a, b = load(inp), load(out)
    want = expected(a, mode, x, y)
    problems = []
    if b.shape != want.shape:
        problems.append(f"shape {b.shape}, want {want.shape}")
    if a.dtype.kind in "US":
        if b.dtype != a.dtype.newbyteorder("<"):
            problems.append(f"dtype {b.dtype.str}, want the input's {a.dtype.str} (little-endian)")
    elif (b.dtype.kind, b.dtype.itemsize) != (a.dtype.kind, a.dtype.itemsize) or b.dtype.byteorder == ">":
        problems.append(f"dtype {b.dtype.str} for input {a.dtype.str}")
    fortran, offset = header(out)
    if fortran:
        problems.append("output is in Fortran order")
    if offset % 64:
        problems.append(f"data starts at byte {offset}, not a multiple of 64")
    with open(out, "rb") as f:
        size = len(f.read())
    if size != offset + b.nbytes:
        problems.append(f"file has {size} bytes, want {offset + b.nbytes}")
    if not problems:
        nan = a.dtype.kind in "fc"
        if not np.array_equal(b, want, equal_nan=nan) if nan else not np.array_equal(b, want):
            problems.append(f"values differ:\n got {b!r}\nwant {want!r}")
    for p in problems:
        print(f"  {out}: {p}", file=sys.stderr)
    return not problems

if sys.argv[1] == "gen":
    np.save(sys.argv[2], eval(sys.argv[3], {"np": np}))
    sys.exit(0)
sys.exit(0 if check(*sys.argv[2:7]) else 1)
EOF

gen() { $PY "$tmp/check.py" gen "$1" "$2"; }

# t NAME EXPR MODE X Y TILED-ARGS... : tiles eval(EXPR) and compares.
t() {
  name=$1 expr=$2 mode=$3 x=$4 y=$5
  shift 5
  in=$tmp/$name.in.npy out=$tmp/$name.out.npy
  if ! gen "$in" "$expr"; then
    bad "$name: cannot generate the input"
    return
  fi
  if ! "$TILED_BIN" tile "$@" "$in" "$out" 2>"$tmp/err"; then
    bad "$name: tiled tile $* failed: $(cat "$tmp/err")"
    return
  fi
  if $PY "$tmp/check.py" check "$out" "$in" "$mode" "$x" "$y"; then ok; else bad "$name"; fi
}

# fails STATUS TEXT TILED-ARGS... : expects that exit status and TEXT on stderr.
fails() {
  want=$1 text=$2
  shift 2
  "$TILED_BIN" tile "$@" >"$tmp/stdout" 2>"$tmp/err"
  st=$?
  if [ "$st" -eq "$want" ] && grep -qF -- "$text" "$tmp/err"; then
    ok
  else
    bad "tiled tile $*: exit $st (want $want), stderr: $(cat "$tmp/err")"
  fi
}

# ---- every dtype, byte order and memory order -----------------------------
t f32 'np.arange(12, dtype=np.float32).reshape(3, 4) / 3' tile 2,3 '' --repeats 2,3
t f64_fortran 'np.asfortranarray(np.arange(24.0).reshape(2, 3, 4))' tile 2,1,2 '' --repeats 2,1,2
t f16_special 'np.array([1.5, np.nan, np.inf, -0.0, 65504, 6e-8], dtype=np.float16)' tile 3 '' --repeats 3
t f32_be '(np.arange(6, dtype=np.float32) - 2.5).astype(">f4").reshape(3, 2)' tile 1,2 '' --repeats 1,2
t f64_be_fortran 'np.asfortranarray(np.arange(6.0).reshape(2, 3)).astype(">f8", order="F")' tile 2,2 '' --repeats 2,2
t i8 'np.array([-128, 0, 127], dtype=np.int8)' tile 4 '' --repeats 4
t i16_be 'np.arange(-3, 3, dtype=">i2").reshape(2, 3)' tile 2,1 '' --repeats 2,1
t i32 'np.arange(-6, 6, dtype=np.int32).reshape(2, 2, 3)' tile 1,3,1 '' --repeats 1,3,1
t i64_be 'np.array([[-2**63, 2**63 - 1, 5]], dtype=">i8")' tile 3,2 '' --repeats 3,2
t u8 'np.arange(250, 256, dtype=np.uint8).reshape(3, 2)' tile 2,2 '' --repeats 2,2
t u16_be_fortran 'np.asfortranarray(np.arange(60000, 60012, dtype=">u2").reshape(3, 4))' tile 1,2 '' --repeats 1,2
t u32 'np.array([0, 2**32 - 1], dtype=np.uint32)' tile 5 '' --repeats 5
t u64_be 'np.array([2**64 - 1, 1], dtype=">u8")' tile 2 '' --repeats 2
t bool 'np.array([[True, False, True]])' tile 2,2 '' --repeats 2,2
t c64 'np.array([1 + 2j, -3.5 - 0.25j], dtype=np.complex64)' tile 3 '' --repeats 3
t c128_be_fortran 'np.asfortranarray(np.array([[1 + 1j, 2 - 2j], [3j, -4]], dtype=">c16"))' tile 2,3 '' --repeats 2,3
t rank5_fortran 'np.asfortranarray(np.arange(120, dtype=np.int16).reshape(2, 3, 1, 4, 5))' tile 1,2,3,1,1 '' --repeats 1,2,3,1,1
t scalar 'np.float64(2.5)' tile '' '' --repeats ''
t empty 'np.zeros((0, 3), dtype=np.int8)' tile 2,2 '' --repeats 2,2
t zero_repeat 'np.arange(6, dtype=np.int32).reshape(2, 3)' tile 0,2 '' --repeats 0,2

# ---- strings keep their .npy kind and width ---------------------------------
t unicode 'np.array([["ab", "\u00e9\u20ac\U0001F600"], ["", "x"]])' tile 2,1 '' --repeats 2,1
t unicode_wide 'np.array(["a", "bb"], dtype="<U7")' tile 3 '' --repeats 3
t unicode_be 'np.array(["\u00fcber", "z"], dtype=">U4")' tile 2 '' --repeats 2
t bytes 'np.array([b"ab", b"", b"\xff\x00q"], dtype="S4")' tile 2 '' --repeats 2
t unicode_fortran 'np.asfortranarray(np.array([["a", "bc"], ["def", ""]]))' tile 1,2 '' --repeats 1,2

# ---- semantics ---------------------------------------------------------------
t numpy_promote 'np.arange(24, dtype=np.float32).reshape(2, 3, 4)' tile 2 '' --semantics numpy --repeats 2
t numpy_scalar 'np.uint16(7)' tile 2,3 '' --semantics numpy --repeats 2,3
t numpy_grow 'np.arange(3, dtype=np.int64)' tile 2,1,2 '' --repeats 2,1,2 --semantics numpy
t openvino 'np.arange(6, dtype=np.int32).reshape(2, 3)' tile 3,1,2 '' --semantics openvino --repeats 3,1,2
t directml 'np.arange(6, dtype=np.int32).reshape(2, 3)' tile 1,3 '' --semantics directml --repeats 1,3
t onnx1 'np.arange(6, dtype=np.float32).reshape(2, 3)' concat 3 1 --tiles 3 --axis 1
t onnx1_neg_axis 'np.asfortranarray(np.arange(24, dtype=np.float16).reshape(2, 3, 4))' concat 2 -2 --tiles 2 --axis -2
t onnx1_explicit 'np.arange(4.0).reshape(4, 1)' concat 2 0 --semantics onnx1 --axis 0 --tiles 2
t onnx1_zero 'np.arange(4.0).reshape(2, 2)' concat 0 0 --tiles 0 --axis=0
t options_after 'np.arange(4, dtype=np.int8)' tile 2 '' --repeats=2 --threads=1

# ---- big output across threads -----------------------------------------------
t threads 'np.arange(1000 * 1000, dtype=np.float32).reshape(1000, 1000)' tile 2,3 '' --repeats 2,3 --threads 4

# ---- stdin and stdout ----------------------------------------------------------
gen "$tmp/pipe.in.npy" 'np.arange(6, dtype=">i4").reshape(2, 3)'
if "$TILED_BIN" tile --repeats 2,2 - - <"$tmp/pipe.in.npy" >"$tmp/pipe.out.npy" 2>"$tmp/err" &&
  $PY "$tmp/check.py" check "$tmp/pipe.out.npy" "$tmp/pipe.in.npy" tile 2,2 ''; then ok; else bad "stdin/stdout: $(cat "$tmp/err")"; fi
if cat "$tmp/pipe.in.npy" | "$TILED_BIN" tile --repeats 1,3 - "$tmp/pipe2.out.npy" 2>"$tmp/err" &&
  $PY "$tmp/check.py" check "$tmp/pipe2.out.npy" "$tmp/pipe.in.npy" tile 1,3 ''; then ok; else bad "pipe in: $(cat "$tmp/err")"; fi
if "$TILED_BIN" tile --repeats 2,1 "$tmp/pipe.in.npy" - 2>"$tmp/err" | cat >"$tmp/pipe3.out.npy" &&
  $PY "$tmp/check.py" check "$tmp/pipe3.out.npy" "$tmp/pipe.in.npy" tile 2,1 ''; then ok; else bad "pipe out: $(cat "$tmp/err")"; fi

# ---- errors ----------------------------------------------------------------------
in=$tmp/pipe.in.npy
fails 2 "missing 'repeats' (semantics onnx needs one repeat per axis)" "$in" "$tmp/x.npy"
fails 2 "usage: tiled tile" "$in" "$tmp/x.npy"
fails 2 "unknown option '--bogus'" --bogus 1 --repeats 1,1 "$in" "$tmp/x.npy"
fails 2 "option --repeats needs a value" "$in" "$tmp/x.npy" --repeats
fails 2 "option --repeats is given twice" --repeats 1,1 --repeats 1,1 "$in" "$tmp/x.npy"
fails 2 "repeats item 1: 'x' is not a decimal integer" --repeats 1,x "$in" "$tmp/x.npy"
fails 2 "expected IN.npy and OUT.npy" --repeats 1,1 "$in"
fails 2 "unexpected argument" --repeats 1,1 "$in" "$tmp/x.npy" extra
fails 2 "'repeats' is not used by semantics onnx1" --repeats 1,1 --tiles 2 --axis 0 "$in" "$tmp/x.npy"
fails 2 "missing 'axis' (semantics onnx1 needs tiles and axis)" --tiles 2 "$in" "$tmp/x.npy"
fails 2 "unknown semantics 'tf'" --semantics tf --repeats 1 "$in" "$tmp/x.npy"
fails 2 "--threads must be in 0..4096" --threads -1 --repeats 1,1 "$in" "$tmp/x.npy"
fails 1 "repeats has 1 values but input has rank 2" --repeats 2 "$in" "$tmp/x.npy"
fails 1 "dtype int32 is not allowed by semantics onnx1" --tiles 2 --axis 0 "$in" "$tmp/x.npy"
fails 1 "semantics directml requires every repeat >= 1" --semantics directml --repeats 0,1 "$in" "$tmp/x.npy"
fails 1 "cannot open '$tmp/missing.npy'" --repeats 1 "$tmp/missing.npy" "$tmp/x.npy"
fails 1 "cannot create" --repeats 1,1 "$in" "$tmp/no/such/dir/x.npy"
gen "$tmp/obj.npy" 'np.array([1, "a", None], dtype=object)'
fails 1 "object arrays (pickled Python objects) are not supported" --repeats 1 "$tmp/obj.npy" "$tmp/x.npy"
gen "$tmp/rec.npy" 'np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")])'
fails 1 "structured dtypes (a list descr) are not supported" --repeats 1 "$tmp/rec.npy" "$tmp/x.npy"
gen "$tmp/dt.npy" 'np.array(["2020-01-01"], dtype="datetime64[D]")'
fails 1 "datetime64 arrays are not supported" --repeats 1 "$tmp/dt.npy" "$tmp/x.npy"
head -c 150 "$in" >"$tmp/short.npy"
fails 1 "$tmp/short.npy: truncated .npy data: shape (2, 3) of '>i4' needs 24 bytes after the header, the file has 22" \
  --repeats 1,1 "$tmp/short.npy" "$tmp/x.npy"
printf 'not numpy' >"$tmp/text.npy"
fails 1 "not a .npy file" --repeats 1 "$tmp/text.npy" "$tmp/x.npy"
if [ -e "$tmp/x.npy" ]; then bad "a failed run left $tmp/x.npy behind"; else ok; fi

if "$TILED_BIN" tile --help >"$tmp/help" 2>&1 && grep -q -- "--repeats" "$tmp/help"; then ok; else bad "--help"; fi
# Each subcommand has its own usage: serve's does not describe tile, and
# the top-level one lists the subcommands.
if "$TILED_BIN" serve --help >"$tmp/help" 2>&1 && grep -q "^usage: tiled serve" "$tmp/help" &&
   ! grep -q "tiled tile" "$tmp/help" && ! grep -q -- "--repeats" "$tmp/help"; then ok; else bad "serve --help"; fi
if "$TILED_BIN" tile --help >"$tmp/help" 2>&1 && ! grep -q -- "--max-body" "$tmp/help"; then ok; else bad "tile --help shows serve options"; fi
if "$TILED_BIN" --help >"$tmp/help" 2>&1 && grep -q "^  serve" "$tmp/help" && grep -q "^  tile" "$tmp/help" &&
   grep -q "^  probe" "$tmp/help"; then ok; else bad "tiled --help lists the subcommands"; fi
if "$TILED_BIN" probe --help 2>&1 | grep -q "^usage: tiled probe"; then ok; else bad "probe --help"; fi
# A new user's first command: `tiled` alone starts nothing; it prints the
# usage on stderr and exits 2 (a daemon would not have exited at all: the
# timeout turns that into a failure, not a hang).
timeout 10 "$TILED_BIN" >"$tmp/noargs.out" 2>"$tmp/noargs.err"
rc=$?
if [ "$rc" = 2 ] && [ ! -s "$tmp/noargs.out" ] && grep -q "^usage: tiled <command>" "$tmp/noargs.err" &&
   grep -q "^  serve" "$tmp/noargs.err"; then ok; else bad "tiled alone: exit $rc, not usage and 2"; fi
# --version: tiled's and, in the full build, the libraries' as linked.
for v in --version version "serve --version"; do
  # shellcheck disable=SC2086 # "serve --version" is two words
  out=$("$TILED_BIN" $v 2>&1)
  if echo "$out" | grep -qE '^tiled [0-9]+\.[0-9]+\.[0-9]+ \(nghttp2 [0-9.]+, GnuTLS [0-9.]+, zlib [0-9.]+, jansson [0-9.]+\)$'
  then ok; else bad "tiled $v: $out"; fi
done

# The README's CLI example as a new user runs it, in an empty folder: its
# first line makes in.npy with Debian's python3 and numpy, the others tile it
# (build/tiled is this binary).
mkdir -p "$tmp/readme"
bin=$(cd "$(dirname "$TILED_BIN")" && pwd)/$(basename "$TILED_BIN")
awk '/^python3 -c .*np\.save\("in\.npy"/ { f = 1 } f && /^```/ { exit } f' README.md |
  sed "s|build/tiled|$bin|" > "$tmp/readme/example.sh"
if [ "$(grep -c "$bin tile" "$tmp/readme/example.sh")" = 3 ] && (cd "$tmp/readme" && PATH=/usr/bin:$PATH sh -e example.sh) &&
   $PY -c 'import numpy as np, sys; a = np.arange(6, dtype=np.float32).reshape(2, 3)
sys.exit(0 if np.array_equal(np.load(sys.argv[1]), np.concatenate([a] * 3, axis=-1)) else 1)' "$tmp/readme/out.npy"
then ok; else bad "the README's CLI example does not run as written"; fi

# ---- valgrind ---------------------------------------------------------------------
if ! command -v valgrind >/dev/null 2>&1; then
  echo "valgrind not found: skipping the valgrind runs" >&2
elif grep -q __asan_init "$TILED_BIN"; then
  echo "$TILED_BIN is built with ASan: skipping the valgrind runs" >&2
else
  gen "$tmp/vg.in.npy" 'np.array([["ab", "\u00e9"], ["", "xyz"]])'
  if valgrind -q --leak-check=full --error-exitcode=1 "$TILED_BIN" tile --repeats 2,3 --threads 2 \
    "$tmp/vg.in.npy" "$tmp/vg.out.npy" 2>"$tmp/vg.err" &&
    $PY "$tmp/check.py" check "$tmp/vg.out.npy" "$tmp/vg.in.npy" tile 2,3 ''; then ok; else bad "valgrind: $(cat "$tmp/vg.err")"; fi
  valgrind -q --leak-check=full --error-exitcode=9 "$TILED_BIN" tile --repeats 1 "$tmp/short.npy" "$tmp/x.npy" 2>"$tmp/vg.err"
  st=$?
  if [ $st -eq 1 ] && [ "$(grep -c . "$tmp/vg.err")" -eq 1 ] && grep -q "^tiled: .*truncated .npy data" "$tmp/vg.err"; then
    ok
  else
    bad "valgrind (error path): exit $st: $(cat "$tmp/vg.err")"
  fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
