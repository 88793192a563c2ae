"""A network you can step into: `up`/`exec` (live.py) and a network held from Python or a test (live_network.py)."""
