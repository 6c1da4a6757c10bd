"""trainrun.distributed.elastic: torchelastic's worker-side API under its
module paths: `multiprocessing.errors.record` (the root cause of a failure,
written for the launcher) and `metrics` (put_metric and its handlers); and
trainrun's `drain_requested()` / `DRAIN_EXIT_CODE` (the agent's Drain)."""
from trainrun.distributed.elastic import metrics, multiprocessing  # noqa: F401
from trainrun.distributed.elastic.drain import DRAIN_EXIT_CODE, drain_requested  # noqa: F401
from trainrun.distributed.elastic.multiprocessing.errors import (ChildFailedError, ProcessFailure,  # noqa: F401
                                                               record)


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
