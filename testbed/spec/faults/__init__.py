"""What changes while training runs: the fault grammar (grammar.py) and the links that follow a trace
(traces.py). Their rules are in testbed/spec/rules/faults.py; applying them, testbed/run/faults.py and
testbed/run/traces.py."""
