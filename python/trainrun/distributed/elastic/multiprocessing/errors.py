"""trainrun.distributed.elastic.record: writes why a worker failed to the
error file the launcher reads (TRAINRUN_ERROR_FILE), then re-raises, so
`trainrun` can print the root cause, as torch.distributed.elastic's does."""
import functools
import traceback

from trainrun import _C


def record(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SystemExit:
            raise
        except BaseException as e:
            _C.distributed.record_error(f"{type(e).__name__}: {e}", traceback.format_exc())
            raise
    return wrapper
