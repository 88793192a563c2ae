"""Executing run points: runner, sweep, live networks, training, checks, monitor, faults, results, cleanup."""
