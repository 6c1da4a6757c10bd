"""torch._dynamo.utils.counters: what trainrun.compile did since the last counters.clear(), under torch's keys:
counters["frames"]["total"] (calls recorded or tried) and ["ok"] (recorded whole), counters["stats"]
["unique_graphs"] (recordings kept) and ["calls_captured"] (ops in them), counters["graph_break"][reason] (calls
that broke, by reason) and counters["recompiles"]["total"] (recordings made for new guards)."""
import collections

counters = collections.defaultdict(collections.Counter)

__all__ = ["counters"]
