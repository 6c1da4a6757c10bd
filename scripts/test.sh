#!/usr/bin/env bash
# The test command: set up, build everything, run every C++ (GoogleTest) and
# Python (pytest) test, and end with one line "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh || exit 1
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"

results=$(mktemp -d)
trap 'rm -rf "$results"; bazel shutdown >/dev/null 2>&1 || true' EXIT

# `bazel test //...` builds every target, not only tests. Exit 1 is a build
# failure; 3 means some tests failed (counted below).
./scripts/bazel.sh test //... --test_env=OPENBLAS_CORETYPE
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then echo "0 passed, 1 failed (bazel exited with $rc: build failed)"; exit 1; fi
cp -rL bazel-testlogs "$results/bazel-testlogs" 2>/dev/null

# Python tests run against the built tree with Debian's interpreter.
if compgen -G "tests/python/test_*.py" >/dev/null; then
  /usr/bin/python3 -m pytest -q tests/python --junitxml="$results/pytest.xml"
fi

/usr/bin/python3 scripts/summarize_tests.py "$results"
