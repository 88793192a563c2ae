"""What changes a running network: faults (the operations, the applier, what each cost) and links that
follow a trace."""
