"""A point's training: its tasks started and supervised, the nodes' usage sampled, the fidelity probe, the
strategy switch."""
