"""Running points: one (runner.py), many with order, resume and progress (sweep.py), the file's expectations
during a sweep (expect_run.py)."""
