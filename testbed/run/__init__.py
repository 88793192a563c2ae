"""Executing run points, one sub-package per role: point/ (a point resolved once, its calibration, its
records), bringup/ (its network up and checked), training/ (the training supervised, monitored, switched),
faults/ (faults and traces applied while it trains), live/ (a network held for `up` and the Python API),
sweep/ (one point run, many run, the file's expectations). results.py (where tables go) and phases.py (where
a point's time went) are the leaves beneath them."""
