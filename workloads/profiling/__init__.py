"""Compute profiles: a model's training step measured where the hardware is (a GPU server, a
many-core box, or here), replayed later by the testbed at scale (docs/profiles.md).

`python -m workloads.profiling MODEL|SCRIPT --engine pytorch|tensorflow --batch B --out FILE` needs
the engine and the standard library only: no root, no Mininet, none of the testbed's dependencies.
fileformat.py reads and checks a profile; the testbed reads it through that module too.
"""
