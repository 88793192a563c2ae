"""The testbed_network fixture as a user's test would use it: a 2-host star at 10 Mbit/s, an HTTP server on
h1 started with net.popen, a download from h2 at the link's rate, then the link set to 2 Mbit/s and the
same download at that rate.

The rates hold to the shaping's bounds on a machine whose timers fire on time; on a VM whose host stalls
them every timer-driven shaper delivers less (as in test_network.py), and the test then asserts what
still must hold: the limit binds, traffic flows, and the slower link is slower."""
import os
import subprocess
import time

import pytest

from testbed.run.bringup.hosthealth import healthy, timer_overshoot

pytestmark = pytest.mark.integration

STAR = {"name": "fixture-star", "topology": {"template": "star", "hosts": 2, "link": {"bw": "10mbit"}}}
PORT = 8000
SIZE = 2_000_000        # bytes: 1.7 s at 10 Mbit/s, 8.4 s at 2 Mbit/s

DOWNLOAD = """
import sys, time, urllib.request
started = time.monotonic()
with urllib.request.urlopen(sys.argv[1], timeout=120) as response:
    size = len(response.read())
print(size, time.monotonic() - started)
"""


def serve(net, folder) -> subprocess.Popen:
    """`python3 -m http.server` on h1 for `folder`, once it listens."""
    server = net.popen("h1", ["python3", "-m", "http.server", str(PORT), "--bind", net.ip("h1"),
                              "--directory", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while f":{PORT}" not in net.exec("h1", ["ss", "-Hltn", f"sport = :{PORT}"]).stdout:
        assert server.poll() is None, f"the HTTP server ended with {server.returncode}"
        assert time.monotonic() < deadline, "the HTTP server does not listen after 30 s"
        time.sleep(0.1)
    return server


def download_bps(net, url: str) -> float:
    """The goodput of one download from h2, bits/s: the file's bits over the time from the request to its
    last byte."""
    done = net.exec("h2", ["python3", "-c", DOWNLOAD, url], timeout=120, check=True)
    size, seconds = done.stdout.split()
    assert int(size) == SIZE
    return int(size) * 8 / float(seconds)


@pytest.mark.testbed_network(STAR)
def test_a_download_takes_the_links_rate_and_slows_down_with_the_link(no_leftovers, testbed_network, tmp_path):
    net = testbed_network
    assert net.hosts == ["h1", "h2"] and net.ip("h1") == "10.0.0.1"
    link = next(link for link in net.links if "h1" in (link.a, link.b))
    assert link.params.bw == 10_000_000
    (tmp_path / "blob").write_bytes(os.urandom(SIZE))
    serve(net, tmp_path)
    url = f"http://{net.ip('h1')}:{PORT}/blob"

    before = timer_overshoot()
    fast = download_bps(net, url)
    changed = net.set_link(link.a, link.b, bw="2mbit")
    slow = download_bps(net, url)
    after = timer_overshoot()
    print(f"10 Mbit/s: {fast / 1e6:.2f} Mbit/s; 2 Mbit/s: {slow / 1e6:.2f} Mbit/s; timers {before} / {after}")

    assert changed.params.bw == 2_000_000 and net.link(link.a, link.b).params.bw == 2_000_000
    assert fast <= 10e6 and slow <= 2e6, "the shaper must bind"
    assert slow < 0.5 * fast, "the slower link must slow the download down"
    if healthy(before) and healthy(after):
        assert 0.85 <= fast / 10e6 <= 1.0
        assert 0.85 <= slow / 2e6 <= 1.0
    else:
        assert fast >= 0.10 * 10e6 and slow >= 0.10 * 2e6, "traffic must flow even on a stalling VM"
