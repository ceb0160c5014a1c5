#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Counts one ctest run from its JUnit file (ctest --output-junit).

Each ctest entry counts once: passed, failed, or skipped. A skip counts
as skipped only if the allow-list names it; any other skip counts as
failed, since a test that skipped tested nothing. Prints the tests that
failed and the skips that are not allowed, then one last line,
"PASSED FAILED SKIPPED", for scripts/test.sh.

    scripts/ctest_counts.py JUNIT ALLOW_LIST BUILD_NAME

The allow-list has one skip per line: a glob over ctest names, then the
reason it may skip (required); # starts a comment.
"""
import fnmatch
import sys
import xml.etree.ElementTree as ET


def read_allow_list(path):
    allowed = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) < 2:
                sys.exit(f"{path}:{number}: '{parts[0]}' has no reason")
            allowed.append((parts[0], parts[1]))
    return allowed


def main():
    junit, allow_path, build = sys.argv[1:4]
    allowed = read_allow_list(allow_path)
    try:
        cases = list(ET.parse(junit).getroot().iter("testcase"))
    except (OSError, ET.ParseError) as e:
        sys.exit(f"{build}: no test results ({e})")
    if not cases:
        sys.exit(f"{build}: ctest ran no test")
    passed = failed = skipped = 0
    seen = set()
    for case in cases:
        name = case.get("name")
        if name in seen:
            sys.exit(f"{build}: {name} appears twice in {junit}")
        seen.add(name)
        status = case.get("status")
        is_skip = case.find("skipped") is not None
        if status == "run" and case.find("failure") is None:
            passed += 1
        elif is_skip:
            reason = next((r for pattern, r in allowed if fnmatch.fnmatchcase(name, pattern)), None)
            if reason is None:
                print(f"{build}: {name} skipped, and {allow_path} does not allow it: failed")
                failed += 1
            else:
                print(f"{build}: {name} skipped ({reason})")
                skipped += 1
        else:
            print(f"{build}: {name} {'did not run' if status == 'notrun' else 'failed'}")
            failed += 1
    print(f"{passed} {failed} {skipped}")


if __name__ == "__main__":
    main()
