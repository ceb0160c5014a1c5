#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The seed corpus committed in tests/fuzz/corpus is what make_fuzz_corpus
# writes: no seed edited by hand, none missing or left over.
#   tests/fuzz/check_corpus.sh MAKE_FUZZ_CORPUS CORPUS_DIR
# To regenerate it after changing a target's input encoding or the
# generator: rm -rf tests/fuzz/corpus && build/bin/make_fuzz_corpus tests/fuzz/corpus
set -euo pipefail

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$1" "$work/corpus"
if ! diff -r "$work/corpus" "$2" >"$work/diff"; then
  head -n 40 "$work/diff"
  echo "tests/fuzz/corpus is not what make_fuzz_corpus writes: regenerate it" >&2
  exit 1
fi
echo "fuzz corpus: $(find "$2" -type f | wc -l) seeds in $(find "$2" -mindepth 1 -type d | wc -l) targets, as generated"
