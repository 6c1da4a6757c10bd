#!/usr/bin/env bash
# The mutation harness: do the tests catch realistic bugs? Each patch of
# tests/mutations/*.patch plants one small bug; this applies it to a scratch
# copy of the working tree, builds and runs the targets the patch names, and
# prints a table (mutation, killed or survived) and the kill ratio.
#
#   scripts/mutation_check.sh [SUBSTRING...]   (only the patches whose names contain one)
#
# A patch file starts with two header lines, then a unified diff:
#   bug: what the planted bug does, as a user would see it
#   targets: //bazel:test_target ... pytest:tests/python/test_x.py[::test_name] ...
# A mutation is killed when a target fails (or, marked "build", when the
# mutated code does not compile: a static_assert or a type error caught it),
# survives when every target passes, and is "stale" when its patch no longer
# applies (rewrite it against the current code). The unmutated tree must pass
# every named target first. Not part of CI (it takes tens of minutes): run it
# before resolving an issue that touches a guarded area. The scratch copy
# (MUTATION_SCRATCH, default ~/.cache/trainrun-mutation) keeps its Bazel
# output between runs, so later runs rebuild only what each patch touches.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"
scratch="${MUTATION_SCRATCH:-$HOME/.cache/trainrun-mutation}"
per_mutation_timeout="${MUTATION_TIMEOUT:-900}"

patches=()
for p in tests/mutations/*.patch; do
  if [ $# -eq 0 ]; then patches+=("$p"); continue; fi
  for want in "$@"; do [[ "$(basename "$p")" == *"$want"* ]] && { patches+=("$p"); break; }; done
done
[ ${#patches[@]} -gt 0 ] || { echo "mutation_check: no patch matches $*" >&2; exit 2; }

header() { sed -n "s/^$2: //p" "$1" | head -1; }

# The scratch copy: the working tree's tracked and untracked-not-ignored files.
mkdir -p "$scratch"
find "$scratch" -mindepth 1 -maxdepth 1 ! -name 'bazel-*' -exec rm -rf {} +
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -C "$scratch" -xf -
cd "$scratch" || exit 1
trap 'cd "$scratch" && bazel shutdown >/dev/null 2>&1' EXIT

# Runs the targets named by a patch: 0 all pass, 1 a test failed, 2 build failed.
run_targets() {
  local bazel_targets=() pytests=() t rc
  for t in $1; do
    case "$t" in pytest:*) pytests+=("${t#pytest:}") ;; *) bazel_targets+=("$t") ;; esac
  done
  if [ ${#pytests[@]} -gt 0 ]; then bazel_targets+=(//python:trainrun/_C.so //launcher:trainrun //proto:checkpoint_py); fi
  # The same --test_env as the test command: Bazel keeps its analysis between the two.
  timeout "$per_mutation_timeout" ./scripts/bazel.sh build "${bazel_targets[@]}" --test_env=OPENBLAS_CORETYPE >>"$log" 2>&1 || return 2
  local tests=()
  for t in "${bazel_targets[@]}"; do [[ "$t" == //tests/* ]] && tests+=("$t"); done
  if [ ${#tests[@]} -gt 0 ]; then
    timeout "$per_mutation_timeout" ./scripts/bazel.sh test "${tests[@]}" --test_env=OPENBLAS_CORETYPE >>"$log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { [ $rc -eq 3 ] && return 1; return 2; }
  fi
  if [ ${#pytests[@]} -gt 0 ]; then
    timeout "$per_mutation_timeout" /usr/bin/python3 -m pytest -q -x -p no:cacheprovider "${pytests[@]}" >>"$log" 2>&1 || return 1
  fi
  return 0
}

log="$scratch/mutation.log"
: >"$log"
all_targets=$(for p in "${patches[@]}"; do header "$root/$p" targets; done | tr ' ' '\n' | sort -u | tr '\n' ' ')
echo "mutation_check: baseline (unmutated) over $all_targets"
if ! run_targets "$all_targets"; then
  echo "mutation_check: the unmutated tree fails its targets; see $log" >&2
  exit 1
fi

killed=0 survived=0 stale=0
rows=()
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  targets=$(header "$root/$p" targets)
  start=$(date +%s)
  if ! git apply --check "$root/$p" 2>/dev/null; then
    rows+=("$(printf '| %-50s | %-16s | %5s | %s' "$name" "stale" "-" "$(header "$root/$p" bug)")")
    stale=$((stale + 1))
    continue
  fi
  git apply "$root/$p"
  echo "=== $name" >>"$log"
  run_targets "$targets"
  rc=$?
  git apply -R "$root/$p"
  case $rc in
    0) verdict="SURVIVED"; survived=$((survived + 1)) ;;
    1) verdict="killed"; killed=$((killed + 1)) ;;
    *) verdict="killed (build)"; killed=$((killed + 1)) ;;
  esac
  rows+=("$(printf '| %-50s | %-16s | %4ss | %s' "$name" "$verdict" "$(($(date +%s) - start))" "$(header "$root/$p" bug)")")
  echo "${rows[-1]}"
done

echo
printf '| %-50s | %-16s | %5s | %s\n' "mutation" "result" "time" "bug"
printf '|%s|%s|%s|%s\n' "$(printf -- '-%.0s' {1..52})" "$(printf -- '-%.0s' {1..18})" "-------" "-----"
printf '%s\n' "${rows[@]}"
total=$((killed + survived))
echo
echo "killed $killed of $total ($(( total ? 100 * killed / total : 0 ))%), survived $survived, stale $stale (log: $log)"
[ $survived -eq 0 ] && [ $stale -eq 0 ]
