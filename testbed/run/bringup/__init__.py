"""A point's network brought up (preflight, BringUp) and checked (iperf3, ping, this machine's timer health)."""
