#!/usr/bin/env bash
# Repeat what CI does: clone the committed HEAD of this repository into a temporary directory
# and run the README's two commands there, `make demo` then `make test`, with CI=true and no
# standard input, timing each; then `pip install .` without extras into a new venv, where
# `wevent check` must work and `wevent prove` must name the extra it needs. Uncommitted changes are not in the clone (CI does not see them
# either). A `shared/` folder beside this repository is linked beside the clone, as CI has it.
#
#   benchmarks/check_fresh.sh [--runs N] [--cold-pip] [--keep]
#
#   --runs N     repeat N times, each in a new clone (default 1); stops at the first failure
#   --cold-pip   no pip cache (PIP_NO_CACHE_DIR=1), as on a new machine
#   --keep       keep the clones (their logs are kept in any case)
#
# Prints one line per command and run: "run 1/3 make test: ok, 512.3 s". Logs go to
# $TMPDIR/wevent-fresh-<stamp>/run-K/{demo,test,core}.log. Exit 0 when every run passed, 1 otherwise,
# 2 for a usage error.
set -uo pipefail

runs=1
keep=0
cold=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) [ $# -ge 2 ] || { echo "check_fresh: --runs needs a value" >&2; exit 2; }
            runs="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --cold-pip) cold=1; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check_fresh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$runs" in ''|*[!0-9]*|0) echo "check_fresh: --runs needs a positive integer" >&2; exit 2 ;; esac

repo="$(cd "$(dirname "$0")/.." && pwd)"
head="$(git -C "$repo" rev-parse --short HEAD)" || { echo "check_fresh: $repo is not a git repository" >&2; exit 2; }
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "check_fresh: note: uncommitted changes in $repo are not tested (the clone is of HEAD $head)" >&2
fi
root="$(mktemp -d "${TMPDIR:-/tmp}/wevent-fresh-XXXXXX")"
echo "check_fresh: HEAD $head, $runs run(s), logs in $root"

step() {  # step RUN DIR NAME: run `make NAME` in DIR, log it, print the result line
  local k="$1" dir="$2" name="$3" log="$root/run-$1/$3.log" start end rc
  start=$(date +%s.%N)
  if [ "$cold" = 1 ]; then
    (cd "$dir/wevent" && CI=true PIP_NO_CACHE_DIR=1 make "$name" </dev/null >"$log" 2>&1)
  else
    (cd "$dir/wevent" && CI=true make "$name" </dev/null >"$log" 2>&1)
  fi
  rc=$?
  end=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" = 0 ]; then
    echo "run $k/$runs make $name: ok, $secs s ($(tail -n 1 "$log" | cut -c1-120))"
  else
    echo "run $k/$runs make $name: FAILED (exit $rc), $secs s; last lines of $log:"
    tail -n 15 "$log" | sed 's/^/    /'
  fi
  return "$rc"
}

core() {  # core RUN DIR: `pip install .` without extras in a new venv: check works, prove hints
  local k="$1" dir="$2" log="$root/run-$1/core.log" ex="$2/wevent/wevent/examples" rc=0
  {
    python3 -m venv "$dir/core-venv" &&
      "$dir/core-venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -c "$dir/wevent/constraints.txt" "$dir/wevent" &&
      (cd "$dir" && core-venv/bin/wevent check "$ex/compliant.jsonl" -r "$ex/requirements.csv" \
        -r "$ex/requirements.dynamic.csv" -r "$ex/requirements.wholestream.csv")
  } >"$log" 2>&1 || rc=1
  (cd "$dir" && core-venv/bin/wevent prove allocator pba >>"$log" 2>&1)
  [ $? = 2 ] && grep -q "needs the prove extra" "$log" || rc=1
  if [ "$rc" = 0 ]; then
    echo "run $k/$runs core install (no extras): ok, check works, prove names its extra;" \
      "venv $(du -sh "$dir/core-venv" | cut -f1)"
  else
    echo "run $k/$runs core install (no extras): FAILED; last lines of $log:"
    tail -n 15 "$log" | sed 's/^/    /'
  fi
  rm -rf "$dir/core-venv"
  return "$rc"
}

status=0
for k in $(seq 1 "$runs"); do
  dir="$root/run-$k"
  mkdir -p "$dir"
  git clone --quiet --no-hardlinks "$repo" "$dir/wevent" || { status=1; break; }
  [ -d "$repo/../shared" ] && ln -s "$(cd "$repo/../shared" && pwd)" "$dir/shared"
  step "$k" "$dir" demo && step "$k" "$dir" test && core "$k" "$dir" || { status=1; break; }
  [ "$keep" = 1 ] || rm -rf "$dir/wevent"
done
exit "$status"
