"""Faithful compute, the pure core: per-node CPU budgets (`budgets`), time dilation
(`dilation`), the fidelity verdict (`fidelity`), readers of cgroup and pressure counters
(`readers`) and memory per process as PSS/USS (`memory`)."""
