"""The files an experiment file names, read and checked: a template graph's GraphML/GML file
(graphfile.py) and a link's trace file (traces.py). The spec calls them while it validates; they import
nothing of the project but testbed.units and testbed.limits (and nothing of the run side)."""
