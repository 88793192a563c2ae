"""One emulated network over several servers (Mininet's cluster edition); `servers` makes local ones."""
