"""A run point as data: resolved once before it runs (point.py, with the calibration of replayed compute,
calibration.py) and recorded after (record.py)."""
