#!/usr/bin/env bash
# The two commands of the README:
#   ./testbed.sh run    install what is missing, run the default sweep, write the report
#   ./testbed.sh test   install what is missing, run every test (unit + integration)
# Anything after the verb is passed on (to run_experiment.py run, or to pytest).
set -euo pipefail
cd "$(dirname "$0")"
verb=${1:-}
shift || true
case "$verb" in
  run)
    bash scripts/bootstrap.sh
    exec .venv/bin/python run_experiment.py run topologies/default.yaml "$@"
    ;;
  test)
    bash scripts/bootstrap.sh
    exec .venv/bin/python -m pytest "$@"
    ;;
  *)
    echo "usage: $0 run [run options] | test [pytest options]" >&2
    exit 2
    ;;
esac
