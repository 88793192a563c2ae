"""The experiment file: YAML -> a validated, typed Experiment, and its sweep -> run points.

Modules, in import order (none imports a later one): keypaths, faults.grammar, expect -> models -> graph ->
rules (rules/) -> validate -> rules.expect, sweep -> load; the files it names are read by testbed.readers.
Other packages import from here, not from the modules.
"""
from testbed.spec.graph import Graph, HostNode, LinkEdge, SwitchNode, build_graph
from testbed.spec.load import json_schema, load_spec, parse_set, validate_file
from testbed.spec.models import (Checks, Experiment, HostConf, LinkParams, Monitor, SpecError, SpecIssue,
                                 Sweep, Topology, Workload)
from testbed.spec.sweep import RunPoint, expand_points
from testbed.spec.validate import with_values

__all__ = ["Checks", "Experiment", "Graph", "HostConf", "HostNode", "LinkEdge", "LinkParams",
           "Monitor", "RunPoint", "SpecError", "SpecIssue", "SwitchNode", "Sweep", "Topology",
           "Workload", "build_graph", "expand_points", "json_schema", "load_spec", "parse_set",
           "validate_file", "with_values"]
