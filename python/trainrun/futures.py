"""torch.futures: Future, the result of asynchronous work (an async collective's Work.get_future(), a DDP
communication hook's return value). wait() blocks for the value (re-raising a failure), then(callback) chains
a new Future whose value is callback(this future), done() polls, and set_result/set_exception complete a Future
made by hand. A Future over a Work completes when the Work does."""
import threading


class Future:
    def __init__(self, *, devices=None):
        self._done = threading.Event()
        self._value = None
        self._error = None
        self._callbacks = []
        self._lock = threading.Lock()
        self._work = None  # (a Work to wait for, and the value it leaves; from Work.get_future)
        self._source = None  # (the parent future and the callback of a then(), run on wait)

    @classmethod
    def _of_work(cls, work, value):
        future = cls()
        future._work, future._value = work, value
        return future

    def done(self):
        if self._done.is_set():
            return True
        if self._work is not None:
            return self._work.is_completed()
        if self._source is not None:
            return self._source[0].done()
        return False

    def wait(self):
        """The value, once complete (a failure is raised here)."""
        if not self._done.is_set():
            if self._work is not None:
                try:
                    self._work.wait()
                except Exception as e:  # noqa: BLE001  (the failure belongs to whoever waits)
                    self.set_exception(e)
                else:
                    self.set_result(self._value)
            elif self._source is not None:
                parent, callback = self._source
                try:
                    parent.wait()
                    self.set_result(callback(parent))
                except Exception as e:  # noqa: BLE001
                    self.set_exception(e)
            else:
                self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value

    def value(self):
        if not self.done():
            raise RuntimeError("Future.value(): the future is not complete (call wait())")
        return self.wait()

    def then(self, callback):
        """A Future of callback(self), computed when this one completes and the result is waited for."""
        future = Future()
        future._source = (self, callback)
        return future

    def add_done_callback(self, callback):
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def _complete(self, value=None, error=None):
        with self._lock:
            if self._done.is_set():
                raise RuntimeError("Future: the result was already set")
            self._value, self._error = value, error
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def set_result(self, result):
        self._complete(value=result)

    def set_exception(self, result):
        self._complete(error=result if isinstance(result, BaseException) else RuntimeError(str(result)))


def collect_all(futures):
    """A Future of the list of futures, complete when all are."""
    future = Future()
    future._source = (_AllOf(futures), lambda _: list(futures))
    return future


def wait_all(futures):
    return [f.wait() for f in futures]


class _AllOf:
    def __init__(self, futures):
        self._futures = list(futures)

    def done(self):
        return all(f.done() for f in self._futures)

    def wait(self):
        for f in self._futures:
            f.wait()
