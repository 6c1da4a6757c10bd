#!/usr/bin/env python3
"""Counts test cases in JUnit XML files (GoogleTest via Bazel, and pytest)
under a folder and prints one line: "N passed, N failed, N skipped".
Exits non-zero when anything failed or nothing ran."""
import pathlib
import re
import sys
import xml.etree.ElementTree as ET


def count(path):
    passed = failed = skipped = 0
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return 0, 1, 0  # a crashed test leaves a broken file
    cases = list(root.iter("testcase"))
    if not cases:
        # Bazel writes a suite-level failure when the binary crashed.
        failures = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in root.iter("testsuite"))
        return 0, 1 if failures else 0, 0
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main():
    folder = pathlib.Path(sys.argv[1])
    totals = [0, 0, 0]
    for xml in sorted(folder.rglob("*.xml")):
        # run_N_of_M / shard_N_of_M folders are left over from by-hand runs
        # with --runs_per_test; the test command never makes them.
        if any(re.fullmatch(r"(run|shard)_\d+_of_\d+", part) for part in xml.parts):
            continue
        for i, n in enumerate(count(xml)):
            totals[i] += n
    passed, failed, skipped = totals
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()
