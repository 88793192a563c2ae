"""The figures: the report's (figures.py, FIGURES), those of what happened inside runs, the topology picture and
the one plotting style."""
