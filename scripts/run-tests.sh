#!/bin/sh
# run-tests.sh - `make test`: every suite, then one closing summary line
# counting the cases of all of them (cmocka, unittest and the shell tests).
set -u
log=build/test.log
mkdir -p build
: > "$log"
status=0
for target in test-unit test-asan check-clang test-integration deploy-test; do
  echo "== make $target" | tee -a "$log"
  ${MAKE:-make} --no-print-directory "$target" 2>&1 | tee -a "$log"
done
passed=$(awk '
  /^\[  PASSED  \] [0-9]+ test/ { n += $4 }
  /^Ran [0-9]+ tests? in/ { ran = $2 }
  /^OK/ && ran != "" { n += ran; ran = "" }
  /^([a-z-]+: )?[0-9]+ passed, [0-9]+ failed$/ { sub(/^[a-z-]+: /, ""); n += $1 }
  END { print n + 0 }' "$log")
failed=$(awk '
  /^\[  FAILED  \] [0-9]+ test/ { n += $4 }
  /^FAILED \((failures|errors)=/ { gsub(/[^0-9=,]/, ""); split($0, a, ","); for (i in a) { split(a[i], b, "="); n += b[2] } }
  /^([a-z-]+: )?[0-9]+ passed, [0-9]+ failed$/ { sub(/^[a-z-]+: /, ""); n += $3 }
  /^make.*Error/ { n += 1 }
  END { print n + 0 }' "$log")
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
