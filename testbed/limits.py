"""Every cap the experiment file is held to, in one place (docs/experiment-file.md, "Limits").

They keep `validate` fast and small on any file, and refuse values no run could honour."""
from __future__ import annotations

# ---- the YAML text ----
MAX_FILE_BYTES = 1_000_000   # an experiment file is a few KB; 1 MB leaves room for long custom lists
MAX_DEPTH = 50               # nesting of mappings and lists (the deepest key path of a real file is ~6)
MAX_YAML_NODES = 100_000     # YAML nodes once aliases are expanded (a "billion laughs" file is refused)
MAX_INT_DIGITS = 30          # longer integer literals stay text (and are refused where a number is due)

# ---- quantities (units) ----
MIN_BANDWIDTH = 8_000        # 8 kbit/s: HTB cannot pace below about one byte per millisecond
MAX_BANDWIDTH = 10 ** 12     # 1 Tbit/s: tc's 64-bit rates go far beyond; the fastest the shaping is checked for
MAX_TIME = 7 * 24 * 3600.0   # seconds: one week, longer than any run
MAX_SIZE = 2 ** 40           # bytes: 1 TiB of memory or gradient
MAX_COUNT = 1_000_000_000    # any count (steps, epochs, batch, queue, repeats, ...)
MAX_CORES = 1024             # cores of one emulated machine
MIN_QUOTA_US = 1_000         # the kernel's (and Docker's) smallest CPU quota ...
MAX_PERIOD_US = 1_000_000    # ... over its longest period
MIN_CORES = MIN_QUOTA_US / MAX_PERIOD_US   # 0.001 core: the smallest budget a quota holds (cores / dilation)
MAX_DILATION = 1000.0        # one emulated second per 1000 s of wall clock is already 16 minutes
MAX_BYTE_SCALE = 1024        # replayed gradients of 1/F the elements: a 500 MB gradient is still 0.5 MB
MIN_SCALED_BANDWIDTH = 10_000_000  # 10 Mbit/s: below it byte-scaled steps read long (testbed/emulation/byte_scale.py)

# ---- the network ----
MAX_HOSTS = 4094             # a /20; per host a shell, a veth pair and a switch port on this machine
MAX_SWITCHES = 4096          # switches of linear, tree or custom
MAX_NODES = 8192             # hosts + switches
MAX_LINKS = 16384            # links of a custom topology
MAX_GRAPH_BYTES = 10_000_000 # a template graph's file (a Topology Zoo graph is 10-100 KB)
MAX_SERVERS = 64             # cluster servers
MAX_CHECK_PAIRS = 10_000     # iperf3 tests of checks.pairs all (every ordered pair of about 100 hosts)

# ---- checks, monitor, faults, workload ----
MAX_CHECK_DURATION = 600.0   # seconds of one iperf3 reading
MIN_MONITOR_INTERVAL = 0.01  # seconds: faster sampling measures the sampler
MAX_MONITOR_INTERVAL = 600.0
MAX_CONNECT_TIMEOUT = 600.0  # seconds to reach a remote machine or server
MAX_FAULTS = 1000
MAX_TRACE_BYTES = 20_000_000  # a trace file (a Mahimahi trace of 48 Mbit/s for 10 minutes is about 15 MB)
MAX_TRACE_ROWS = 100_000     # steps of one trace (csv rows, or Mahimahi steps of trace_granularity)
MIN_TRACE_GRANULARITY = 0.1  # seconds: a link is re-shaped at most about every 50 ms
MAX_ENV = 1000               # workload.env entries and workload.args items
MAX_EXPECTATIONS = 100       # expect: items, each judged on every point after it runs
MAX_WHERE = 32               # key paths of one expectation's where (as many as sweep axes)

# ---- sweeps ----
MAX_POINTS = 1000            # run points (axes' values multiplied, times repeats); each is minutes of training
MAX_AXES = 32
MAX_POINT_NODES = 20_000     # run points x nodes of the largest point: how much validation rebuilds
