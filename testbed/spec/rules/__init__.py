"""Cross-field rules of a structurally valid Experiment, each yielding Problems (problems.py): the entry,
the workload's, emulation's and cluster's rules (experiment.py); the topology's (topology.py), the faults'
and traces' (faults.py), the models' and profiles' (model.py), workload.communication's
(communication.py); `expect:` checked once per file (expect.py). Beside them the tables they read: what
each shaper can do (capabilities.py) and image references (image_reference.py)."""
