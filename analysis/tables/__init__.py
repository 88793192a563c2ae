"""Reading a results folder and what it measures: the tables (tables.py), a run's steady state, the one speedup,
the spread rule, the trends, stability, faithful compute, the communication settings' pay-off, the timer limits."""
