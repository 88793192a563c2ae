"""The network's error, apart so that what builds part of the network (testbed.cluster) can raise
it without importing the network."""


class NetworkError(RuntimeError):
    pass
