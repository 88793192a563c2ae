"""The cost model (costmodel/), what it predicts without running (predict.py), strategy auto (advisor.py) and the
bytes each communication setting sends, in theory (communication.py)."""
