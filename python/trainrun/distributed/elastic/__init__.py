"""trainrun.distributed.elastic: torchelastic's worker-side API under its
module paths: `multiprocessing.errors.record` (the root cause of a failure,
written for the launcher) and `metrics` (put_metric and its handlers)."""
from trainrun.distributed.elastic import metrics, multiprocessing  # noqa: F401
from trainrun.distributed.elastic.multiprocessing.errors import record  # noqa: F401
