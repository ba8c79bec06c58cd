#!/bin/sh
# Runs one ctest test after checking what it needs (interpreters, Python
# modules) and says clearly when something is missing:
#   - outside CI: prints "SKIP <test>: ..." and exits 77, which ctest reports
#     as Skipped (the test is registered with SKIP_RETURN_CODE 77, see
#     tests/cmake/KiteTesting.cmake);
#   - under CI (environment variable CI set to anything but "", 0, false, no,
#     off, as GitHub Actions, GitLab and most CI services set CI=true): prints
#     "FAIL <test>: ..." and exits 1, because a CI machine that lacks a
#     prerequisite must not report green for tests it never ran.
# When everything is there, it execs the command, so the command's own exit
# status (and output) is the test's.
#
# Usage: run_with_prereqs.sh TEST_NAME [--python PY MODULES]... [--file PATH WHAT]...
#                            -- COMMAND [ARGS...]
#   PY       interpreter path ("" or *-NOTFOUND when CMake found none)
#   MODULES  comma-separated modules that PY must import ("" for none)
#   PATH     a file an earlier test writes (a fixture's output), WHAT says
#            which test and what it needs: a fixture that skipped for a
#            missing prerequisite leaves its readers without input, and ctest
#            runs them anyway (it only holds them back when the fixture fails)
#
# A missing GPU is not a missing prerequisite: device tests skip through
# tests/support/kite_test_skip.h (C++) or kite_test_skip.py, not this script.
set -u

SKIP_CODE=77  # = KITE_TEST_SKIP_CODE in tests/cmake/KiteTesting.cmake

if [ "$#" -lt 1 ]; then
  echo "usage: run_with_prereqs.sh TEST_NAME [--python PY MODULES]... [--file PATH WHAT]... -- COMMAND [ARGS...]" >&2
  exit 2
fi
test_name=$1
shift

missing=""
note() { missing="${missing:+$missing; }$1"; }
files_missing=0
first_missing=""
first_why=""

while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --python)
      if [ "$#" -lt 3 ]; then
        echo "run_with_prereqs: --python needs PY and MODULES" >&2
        exit 2
      fi
      py=$2
      modules=$3
      shift 3
      case "$py" in
        "" | *-NOTFOUND)
          note "no Python interpreter was found at configure time (needed for: ${modules:-the script})"
          continue
          ;;
      esac
      if ! [ -x "$py" ]; then
        note "interpreter $py is not an executable file"
        continue
      fi
      if [ -n "$modules" ]; then
        # One interpreter start for all modules; prints "name: error" per missing one.
        # (stderr is dropped: importing torch may warn without failing)
        why=$("$py" - "$modules" 2>/dev/null <<'EOF'
import importlib, sys
for name in sys.argv[1].split(","):
    try:
        importlib.import_module(name)
    except Exception as e:  # ImportError, or a module that fails while importing
        print(f"{name} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
EOF
        ) || why="${why:+$why }(the interpreter itself exited with an error)"
        if [ -n "$why" ]; then
          note "$py cannot import: $(printf '%s' "$why" | tr '\n' ' ')"
        fi
      fi
      ;;
    --file)
      if [ "$#" -lt 3 ]; then
        echo "run_with_prereqs: --file needs PATH and WHAT" >&2
        exit 2
      fi
      if ! [ -f "$2" ]; then
        files_missing=$((files_missing + 1))
        if [ "$files_missing" -eq 1 ]; then
          first_missing=$2
          first_why=$3
        fi
      fi
      shift 3
      ;;
    *)
      echo "run_with_prereqs: unknown argument '$1'" >&2
      exit 2
      ;;
  esac
done
if [ "$#" -eq 0 ]; then
  echo "run_with_prereqs: missing '-- COMMAND'" >&2
  exit 2
fi
shift  # the "--"
if [ "$#" -eq 0 ]; then
  echo "run_with_prereqs: no command after '--'" >&2
  exit 2
fi

if [ "$files_missing" -gt 0 ]; then
  more=""
  [ "$files_missing" -gt 1 ] && more=" (and $((files_missing - 1)) more files)"
  note "$first_missing does not exist$more ($first_why)"
fi

if [ -n "$missing" ]; then
  ci=$(printf '%s' "${CI:-}" | tr '[:upper:]' '[:lower:]')
  case "$ci" in
    "" | 0 | false | no | off)
      echo "SKIP $test_name: missing prerequisite: $missing"
      echo "  (scripts/setup.sh installs everything the tests need; under CI=true this is a failure)"
      exit "$SKIP_CODE"
      ;;
    *)
      echo "FAIL $test_name: missing prerequisite: $missing"
      echo "  (CI=${CI}: a missing prerequisite fails the test; run scripts/setup.sh on this machine)"
      exit 1
      ;;
  esac
fi

exec "$@"
