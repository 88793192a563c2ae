"""When this machine's kernel timers count as healthy: the bounds the runner checks each run's
timer overshoot against (testbed/run/bringup/hosthealth.py) and the report reads its figures with."""

HEALTHY_P99_MS = 5.0
HEALTHY_MAX_MS = 20.0
