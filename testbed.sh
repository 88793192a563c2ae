#!/usr/bin/env bash
# The two commands of the README:
#   ./testbed.sh run    install what is missing, run the default sweep, write the report
#   ./testbed.sh test   install what is missing, run every test (integration tests one at a time,
#                       unit tests beside them at idle priority)
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
    # Every test. The unit tests that time themselves (marked `timing`) run first, with the CPUs to
    # themselves. The integration tests run one after another, since they share the machine's network,
    # its CPU budgets and its timers. The other unit tests run beside those that judge behaviour, not
    # time (marked `behaviour` in tests/integration/conftest.py), at the CPU's idle priority
    # (SCHED_IDLE: only on cycles nothing else asks for), in a session and a temporary folder of their
    # own; the integration tests that measure start when they have ended (idle cycles still delay a woken
    # task until the next tick, and share the caches). The images the integration tests need are built
    # before those start (cached after), at low priority, after the timing tests: beside them a build
    # woke their sleeps late.
    timing=0 unit=0 behaviour=0 integration=0 beside="" prebuild=""
    lane=$(mktemp -d -t dltb-unit-tests.XXXXXX)
    mkdir "$lane/tmp" && : > "$lane/prebuild.log" && : > "$lane/unit.log"
    # (a trap's failure would be the exit status)
    trap '[ -z "$prebuild" ] || kill "$prebuild" 2>/dev/null || true; [ -z "$beside" ] || kill -- -"$beside" 2>/dev/null || true; rm -rf "$lane"' EXIT
    .venv/bin/python -m pytest -n auto -m timing tests/unit || timing=$?
    [ "$timing" -eq 2 ] && exit 2        # interrupted (Ctrl-C): stop here
    nice -n 10 .venv/bin/python tests/prebuild_images.py --log "$lane/prebuild.log" & prebuild=$!
    echo "the other unit tests: beside the image builds and the behaviour tests (log $lane/unit.log)"
    TMPDIR="$lane/tmp" setsid chrt --idle 0 .venv/bin/python -m pytest -n auto -m "not timing" tests/unit \
      > "$lane/unit.log" 2>&1 & beside=$!
    echo "waiting for the images the integration tests use (log $lane/prebuild.log)"
    wait "$prebuild" || echo "an image was not built beforehand: the test that needs it builds it and says why"
    cat "$lane/prebuild.log"
    DLTB_TESTS_BESIDE=$beside .venv/bin/python -m pytest -m behaviour tests/integration || behaviour=$?
    [ "$behaviour" -eq 2 ] && exit 2
    echo "waiting for the unit tests before the integration tests that measure (log $lane/unit.log)"
    wait "$beside" || unit=$?
    echo "the unit tests run beside the integration tests that judge behaviour:"
    cat "$lane/unit.log"
    .venv/bin/python -m pytest -m "not behaviour" tests/integration || integration=$?
    for status in "$timing" "$unit" "$behaviour" "$integration"; do
      [ "$status" -ne 0 ] && exit "$status"
    done
    exit 0
    ;;
  *)
    echo "usage: $0 run [run options] | test [pytest options] | install" >&2
    exit 2
    ;;
esac
