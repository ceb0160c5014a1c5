#!/usr/bin/env bash
# Installs every dependency, builds uroce and runs all of its tests:
#   1. the release build's tests (ctest),
#   2. the same tests under ASan+UBSan, then under TSan,
#   3. each libFuzzer target for UROCE_FUZZ_SECONDS (default 40; six
#      targets, one per core at a time) under ASan+UBSan, built with
#      clang, from its seed corpus,
#   4. a build (no test run) of the other standard build types, each
#      warning-free (-Werror) and counted as one test: Debug with Clang,
#      of everything; Release with GCC, of what ships (no tests).
# It ends with "tests: N passed, M failed, K skipped", each ctest entry
# counted once per build and each fuzz target once. Any failure,
# sanitizer report, fuzzer crash or skip that tests/skips.allow does not
# name fails the script.
# Run as root from anywhere: sudo scripts/test.sh
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
fuzz_seconds=${UROCE_FUZZ_SECONDS:-40}
jobs=$(nproc)

bash scripts/setup.sh

passed=0
failed=0
skipped=0
# What failed, said again above the summary: a CI log is often read from
# its end, and a tree's ctest output can run to thousands of lines.
failures=()

# run_suite SEEDS DIR CMAKE_ARGS...: configure, build and ctest one build
# tree; SEEDS is how many random seeds the transport's property tests run
# per loss level (sanitizer builds run fewer: they are 5-20 times slower).
# Each ctest entry counts once, from ctest's JUnit file: passed, failed,
# or skipped; a skip that tests/skips.allow does not name counts as
# failed (scripts/ctest_counts.py).
run_suite() {
  local seeds=$1 dir=$2
  shift 2
  echo "==> $dir: configure, build, test"
  # Called as `run_suite ... || true`, where set -e does not hold: every
  # step checks its own status.
  if ! cmake -S "$root" -B "$dir" -G Ninja "$@" >/dev/null || ! cmake --build "$dir" -j "$jobs"; then
    echo "==> $dir: the build failed" >&2
    failed=$((failed + 1))
    failures+=("$dir: the build failed")
    return 1
  fi
  local junit=$root/$dir/ctest-junit.xml
  rm -f "$junit"
  local status=0
  UROCE_SIM_SEEDS=$seeds TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1" \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 1200 \
    --output-junit "$junit" || status=$?
  local counts
  if ! counts=$(python3 "$root/scripts/ctest_counts.py" "$junit" "$root/tests/skips.allow" "$dir"); then
    echo "==> $dir: no test results" >&2
    failed=$((failed + 1))
    failures+=("$dir: no test results")
    return 1
  fi
  local last p f k
  last=$(tail -n 1 <<<"$counts")
  head -n -1 <<<"$counts"
  local line
  while IFS= read -r line; do
    if [[ $line == *" failed" || $line == *" did not run" ]]; then failures+=("$line"); fi
  done < <(head -n -1 <<<"$counts")
  read -r p f k <<<"$last"
  echo "==> $dir: $p passed, $f failed, $k skipped"
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + k))
  # ctest fails on a failed test, not on a skip; the counts decide.
  if ((f > 0)); then return 1; fi
  if ((status != 0)); then
    echo "==> $dir: ctest exited $status with no failed test" >&2
    failed=$((failed + 1))
    failures+=("$dir: ctest exited $status with no failed test")
    return 1
  fi
}

# A failed build goes on to the next: the summary counts them all.
# build/ is RelWithDebInfo (GCC) with line tables only (-g1, as in the
# sanitizer trees): what a test's failure report and a backtrace need.
# Full debug info is 30 % of its compile time (7.1 s against 5.0 s for a
# heavy test file), and no warning depends on it.
g1="-O2 -g1 -DNDEBUG"
run_suite "${UROCE_SIM_SEEDS:-1000}" build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$g1" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$g1" || true
run_suite 150 build-asan -DUROCE_SANITIZE=address -DUROCE_BUILD_BENCH=OFF || true
run_suite 60 build-tsan -DUROCE_SANITIZE=thread -DUROCE_BUILD_BENCH=OFF || true

# Every libFuzzer target, from its seed corpus (tests/fuzz/corpus, made by
# make_fuzz_corpus) and what earlier runs found (build-fuzz/corpus). The
# frame targets take a 9216-byte jumbo frame and their mode byte; the
# engine and transport targets take sequences of frames and actions.
echo "==> build-fuzz: libFuzzer targets, ${fuzz_seconds}s each"
declare -A max_len=([fuzz_wire_parser]=9217 [fuzz_ndp]=9217 [fuzz_classify]=9217
  [fuzz_engine_rx]=20000 [fuzz_transport_rx]=20000 [fuzz_cm_mad]=20000)
fuzzers=(fuzz_wire_parser fuzz_ndp fuzz_classify fuzz_engine_rx fuzz_transport_rx fuzz_cm_mad)
if ! CC=clang CXX=clang++ cmake -S "$root" -B build-fuzz -G Ninja -DUROCE_FUZZ=ON \
  -DUROCE_BUILD_BENCH=OFF >/dev/null || ! cmake --build build-fuzz -j "$jobs" --target "${fuzzers[@]}"; then
  echo "==> build-fuzz: the build failed" >&2
  failed=$((failed + ${#fuzzers[@]}))
  failures+=("build-fuzz: the build failed")
  fuzzers=()
fi
# One fuzzer per core at a time: each still gets its seconds of a core.
fuzz_one() {  # TARGET: runs it; its status is the fuzzer's
  local f=$1 corpus=build-fuzz/corpus/$1
  mkdir -p "$corpus"
  # New inputs go to the first folder; the committed seeds are only read.
  local seeds=()
  [[ -d tests/fuzz/corpus/$f ]] && seeds=("tests/fuzz/corpus/$f")
  build-fuzz/bin/$f -max_total_time="$fuzz_seconds" -max_len="${max_len[$f]}" \
    -print_final_stats=1 -artifact_prefix=build-fuzz/$f- "$corpus" "${seeds[@]}" \
    >"build-fuzz/$f.log" 2>&1
}
running=()
reap_fuzzers() {  # waits for the running fuzzers and counts them
  local entry f
  for entry in "${running[@]}"; do
    f=${entry#*:}
    if wait "${entry%%:*}"; then
      echo "==> $f: $(grep -E '^#[0-9]+[[:space:]]+DONE' "build-fuzz/$f.log" | tail -1)"
      passed=$((passed + 1))
    else
      tail -n 60 "build-fuzz/$f.log"
      echo "==> $f found a crash; the input is in build-fuzz/ ($f-crash-*)" >&2
      failed=$((failed + 1))
      failures+=("$f found a crash")
    fi
  done
  running=()
}
for f in "${fuzzers[@]}"; do
  fuzz_one "$f" &
  running+=("$!:$f")
  if ((${#running[@]} >= jobs)); then reap_fuzzers; fi
done
reap_fuzzers

# The other build types: developers build Debug, packagers Release. With
# build/ (RelWithDebInfo, GCC) every source is built warning-free by both
# compilers. Clang's warnings come from its front end and do not depend on
# the optimisation level (though Clang sees the code with asserts on, not
# under NDEBUG); GCC's flow-based ones (maybe-uninitialized, array-bounds,
# stringop-*) show at -O2 and -O3, not at -O0. Release builds what ships:
# libraries, drivers, programs and benchmarks. GCC builds the tests at -O2
# (build/) and -O1 (the sanitizer trees) already, and building them again
# at -O3 took 8 of Release's 14 CPU minutes.
build_only() {  # DIR CMAKE_ARGS...: one build, counted as one test
  local dir=$1
  shift
  echo "==> $dir: build"
  if cmake -S "$root" -B "$dir" -G Ninja "$@" >/dev/null && cmake --build "$dir" -j "$jobs" >"$dir.log" 2>&1; then
    passed=$((passed + 1))
  else
    tail -n 40 "$dir.log" >&2
    echo "==> $dir: the build failed" >&2
    failed=$((failed + 1))
    failures+=("$dir: the build failed")
  fi
}
build_only build-debug -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++
build_only build-release -DCMAKE_BUILD_TYPE=Release -DUROCE_BUILD_TESTS=OFF

for line in "${failures[@]}"; do echo "FAILED: $line"; done
echo "tests: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
