#!/usr/bin/env bash
# The two commands of the README:
#   ./testbed.sh run    install what is missing, run the default sweep, write the report
#   ./testbed.sh test   install what is missing, run every test (unit tests on all cores, then
#                       integration tests one at a time)
# and, for CI jobs that run their own files: ./testbed.sh install (install what is missing, nothing else).
# Anything after the verb is passed on (to run_experiment.py run, or to pytest, which then runs
# just that, in one process).
set -euo pipefail
cd "$(dirname "$0")"
verb=${1:-}
shift || true
case "$verb" in
  install)
    exec bash scripts/bootstrap.sh
    ;;
  run)
    bash scripts/bootstrap.sh
    exec .venv/bin/python run_experiment.py run topologies/default.yaml "$@"
    ;;
  test)
    bash scripts/bootstrap.sh
    if [ $# -gt 0 ]; then
      exec .venv/bin/python -m pytest "$@"
    fi
    # Every test: the unit tests on all cores at once (pytest-xdist), then the integration tests one
    # after another, since they share the machine's network, its CPU budgets and its timers. The
    # images the integration tests need are built meanwhile, at low priority (cached after).
    unit=0 integration=0
    log=$(mktemp -t dltb-prebuild.XXXXXX)
    nice -n 10 .venv/bin/python tests/prebuild_images.py --log "$log" & prebuild=$!
    trap 'kill "$prebuild" 2>/dev/null || true; rm -f "$log"' EXIT   # (a trap's failure would be the exit status)
    .venv/bin/python -m pytest -n auto tests/unit || unit=$?
    [ "$unit" -eq 2 ] && exit 2          # interrupted (Ctrl-C): stop here
    echo "waiting for the images the integration tests use (log $log)"
    wait "$prebuild" || echo "an image was not built beforehand: the test that needs it builds it and says why"
    cat "$log"
    .venv/bin/python -m pytest tests/integration || integration=$?
    [ "$unit" -ne 0 ] && exit "$unit"
    exit "$integration"
    ;;
  *)
    echo "usage: $0 run [run options] | test [pytest options] | install" >&2
    exit 2
    ;;
esac
