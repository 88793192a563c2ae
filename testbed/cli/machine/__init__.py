"""The verbs that look after this machine: the worker image, the local cluster servers, cleanup after a crash."""
