"""dltestbed remote agent: runs ON a remote machine with the node's python (nothing to install there),
sent as `python -c SOURCE COMMAND ...`; the standard library only.

    sample TOKEN INTERFACE INTERVAL   one JSON line per INTERVAL seconds: cumulative CPU seconds and
                                      resident memory of the run's processes, bytes sent and received
                                      on INTERFACE (-netns: on every interface but lo of its
                                      network namespace), and the machine's monotonic clock then
    end TOKEN                         SIGKILL every process of the run; prints how many there were
    guard INTERFACE                   a line a second; once nobody reads them (the SSH session that
                                      started it is gone), remove INTERFACE's shaping
    cgroup PLAN                       make a host's cgroups: PLAN is JSON [[directory, [[file, text],
                                      ...]], ...] (testbed.nodes.cgroups.limit_plan), in order
    cgread DIR...                     JSON {file: text} of the CPU counters in those cgroups
    uncgroup DIR...                   kill what is left in each cgroup, remove it; prints how many went

The run's processes are those whose environment holds DLTESTBED_RUN=TOKEN (the node sets it on every
process it starts, and children inherit it), so a reused pid never points at a stranger."""
import json
import os
import signal
import sys
import time

NETNS = "-netns"      # INTERFACE meaning: every interface of the namespace the agent runs in


def run_pids(token):
    entry = b"DLTESTBED_RUN=" + token.encode()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open("/proc/%s/environ" % name, "rb") as fh:
                    if entry in fh.read().split(b"\0"):
                        yield int(name)
            except OSError:
                pass


def counters(token, interface):
    cpu = rss = 0
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    for pid in run_pids(token):
        try:
            with open("/proc/%d/stat" % pid) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()   # after the command name, which may hold blanks
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / tick     # utime + stime (fields 14 and 15 of stat)
        rss += int(fields[21]) * page                         # rss in pages (field 24)
    if interface == NETNS:
        net = netns_counters()
    else:
        net = {}
        for way in ("tx", "rx"):
            with open("/sys/class/net/%s/statistics/%s_bytes" % (interface, way)) as fh:
                net[way + "_bytes"] = int(fh.read())
    return dict(cpu_s=round(cpu, 3), rss_bytes=rss, clock_s=round(time.monotonic(), 4), **net)


def netns_counters():
    """Bytes of every interface but loopback of this process's network namespace (/proc/net/dev
    follows the namespace; /sys/class/net follows the mount, which nsenter --net keeps)."""
    tx = rx = 0
    with open("/proc/net/dev") as fh:
        for line in fh.readlines()[2:]:
            name, data = line.split(":", 1)
            if name.strip() != "lo":
                fields = data.split()
                rx += int(fields[0])
                tx += int(fields[8])
    return dict(tx_bytes=tx, rx_bytes=rx)


COUNTER_FILES = ("cpu.stat", "cpuacct.usage", "cpu.pressure")     # what testbed.emulation.readers reads


def make_cgroups(plan):
    for directory, files in plan:
        os.makedirs(directory, exist_ok=True)
        for name, text in files:
            with open(os.path.join(directory, name), "w") as fh:
                fh.write(text)


def read_counters(dirs, names=COUNTER_FILES):
    out = {}
    for d in dirs:
        for name in names:
            try:
                with open(os.path.join(d, name)) as fh:
                    out[name] = fh.read()
            except OSError:
                pass
    return out


def remove_cgroups(dirs):
    """Each cgroup's processes killed, then the (empty) directory removed, retried while they exit."""
    removed = 0
    for d in dirs:
        deadline = time.monotonic() + 10
        while os.path.isdir(d):
            for pid in read_counters([d], ["cgroup.procs"]).get("cgroup.procs", "").split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(d)
                removed += 1
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
    return removed


def main(argv):
    if argv[0] == "sample":
        while True:
            print(json.dumps(counters(argv[1], argv[2])), flush=True)
            time.sleep(float(argv[3]))
    elif argv[0] == "guard":
        try:
            while True:
                print("alive", flush=True)
                time.sleep(1)
        except OSError:        # BrokenPipeError: this side is gone
            os.execvp("tc", ["tc", "qdisc", "del", "dev", argv[1], "root"])
    elif argv[0] == "end":
        ended = 0
        for pid in run_pids(argv[1]):
            try:
                os.kill(pid, signal.SIGKILL)
                ended += 1
            except OSError:
                pass
        print(ended)
    elif argv[0] == "cgroup":
        make_cgroups(json.loads(argv[1]))
    elif argv[0] == "cgread":
        print(json.dumps(read_counters(argv[1:])))
    elif argv[0] == "uncgroup":
        print(remove_cgroups(argv[1:]))


if __name__ == "__main__":
    main(sys.argv[1:])
