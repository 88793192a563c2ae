"""Network bring-up: Mininet, switches, link shaping, and where each node lives."""
