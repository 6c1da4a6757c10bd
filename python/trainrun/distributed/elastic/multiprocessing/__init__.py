"""trainrun.distributed.elastic.multiprocessing: errors.record, as torchelastic's."""
from trainrun.distributed.elastic.multiprocessing import errors  # noqa: F401
