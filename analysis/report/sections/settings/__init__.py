"""The report's sections that compare settings of the same cluster by time to the target loss or steady
samples/s: communication (workload.communication) and mixed_machines (workload.balance, nodes of different
speeds)."""
