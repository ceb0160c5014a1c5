#!/usr/bin/env bash
# Installs every dependency, builds uroce and runs all of its tests:
#   1. the release build's tests (ctest),
#   2. the same tests under ASan+UBSan, then under TSan,
#   3. each libFuzzer target for UROCE_FUZZ_SECONDS (default 60) under
#      ASan+UBSan, built with clang.
# Any failure, sanitizer report or fuzzer crash fails the script.
# Run as root from anywhere: sudo scripts/test.sh
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
fuzz_seconds=${UROCE_FUZZ_SECONDS:-60}
jobs=$(nproc)

bash scripts/setup.sh

passed=0
failed=0

# run_suite SEEDS DIR CMAKE_ARGS...: configure, build and ctest one build
# tree; SEEDS is how many random seeds the transport's property tests run
# per loss level (sanitizer builds run fewer: they are 5-20 times slower).
run_suite() {
  local seeds=$1 dir=$2
  shift 2
  echo "==> $dir: configure, build, test"
  cmake -S "$root" -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  local log
  log=$(mktemp)
  local status=0
  UROCE_SIM_SEEDS=$seeds TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1" ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 1200 |
    tee "$log" || status=$?
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1 || true)
  rm -f "$log"
  if [[ -z $line ]]; then
    echo "==> $dir: ctest printed no result" >&2
    return 1
  fi
  local total bad
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  bad=$(sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/' <<<"$line")
  passed=$((passed + total - bad))
  failed=$((failed + bad))
  return "$status"
}

run_suite "${UROCE_SIM_SEEDS:-1000}" build
run_suite 150 build-asan -DUROCE_SANITIZE=address -DUROCE_BUILD_BENCH=OFF
run_suite 60 build-tsan -DUROCE_SANITIZE=thread -DUROCE_BUILD_BENCH=OFF

echo "==> build-fuzz: libFuzzer targets, ${fuzz_seconds}s each"
CC=clang CXX=clang++ cmake -S "$root" -B build-fuzz -G Ninja -DUROCE_FUZZ=ON \
  -DUROCE_BUILD_BENCH=OFF >/dev/null
fuzzers=(fuzz_wire_parser)
cmake --build build-fuzz -j "$jobs" --target "${fuzzers[@]}"
for f in "${fuzzers[@]}"; do
  corpus=build-fuzz/corpus/$f
  mkdir -p "$corpus"
  if build-fuzz/bin/$f -max_total_time="$fuzz_seconds" -print_final_stats=1 \
    -artifact_prefix=build-fuzz/ "$corpus" \
    >"build-fuzz/$f.log" 2>&1; then
    tail -n 12 "build-fuzz/$f.log"
    passed=$((passed + 1))
  else
    tail -n 60 "build-fuzz/$f.log"
    echo "==> $f found a crash; the input is in build-fuzz/ (crash-*)" >&2
    failed=$((failed + 1))
  fi
done

echo "tests: $passed passed, $failed failed"
((failed == 0))
