"""CommDebugMode (PyTorch's trainrun.distributed.tensor.debug.CommDebugMode):
counts the collectives DTensor issues while it is active, by kind."""
from trainrun.distributed.tensor import _redistribute


class CommDebugMode:
    """with CommDebugMode() as comm: ...; comm.get_total_counts(), comm.get_comm_counts() (kind -> count)."""

    def __init__(self):
        self._counts = {}

    def __enter__(self):
        self._counts = {}
        _redistribute._COUNTERS.append(self._counts)
        return self

    def __exit__(self, *exc):
        _redistribute._COUNTERS.remove(self._counts)
        return False

    def get_total_counts(self):
        return sum(self._counts.values())

    def get_comm_counts(self):
        return dict(self._counts)
