"""DataLoader with worker processes: the main process's side.

Indices are drawn here (so the order is the sampler's, whatever the worker
count) and dealt round-robin to the workers' index queues, at most
prefetch_factor tasks per worker ahead; batches come back on one result
queue, in any order, as shared-memory tensors (no copy), and are handed out
in task order. A worker's exception is re-raised here with its traceback; a
worker that dies is named with its pid and exit code or signal."""
import itertools
import multiprocessing
import os
import queue
import signal
import time

from trainrun.multiprocessing import Queue
from trainrun.utils.data import _worker
from trainrun.utils.data.dataset import IterableDataset

# How often the main process checks its workers while it waits for a batch.
_POLL_INTERVAL = 0.5


def _exit_description(process):
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"is killed by signal: {signal.Signals(-code).name}"
        except ValueError:
            return f"is killed by signal {-code}"
    return f"exited unexpectedly with exit code {code}"


class _InfiniteConstantSampler:
    """For an IterableDataset: one task per batch, the worker decides what is in it."""

    def __iter__(self):
        while True:
            yield None


class MultiProcessingDataLoaderIter:
    def __init__(self, loader, base_seed):
        self._loader = loader
        self._iterable = isinstance(loader.dataset, IterableDataset)
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._persistent = loader.persistent_workers
        self._timeout = loader.timeout
        self._index_sampler = (_InfiniteConstantSampler() if self._iterable else
                               loader.batch_sampler if loader.batch_sampler is not None else loader.sampler)
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing.get_context()
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self._result_queue = Queue(ctx=ctx)
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        self._shutdown = False
        for worker_id in range(self._num_workers):
            index_queue = Queue(ctx=ctx)
            index_queue.cancel_join_thread()
            worker = ctx.Process(
                target=_worker.worker_loop, daemon=True, name=f"DataLoader worker {worker_id}",
                args=(self._iterable, loader.dataset, index_queue, self._result_queue, self._done_event,
                      loader.batch_sampler is not None or (self._iterable and loader.batch_size is not None),
                      loader.collate_fn, loader.batch_size, loader.drop_last, base_seed, loader.worker_init_fn,
                      worker_id, self._num_workers, os.getpid()))
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)
        self._reset(first=True)

    def _reset(self, first=False):
        self._sampler_iter = iter(self._index_sampler)
        self._send_idx = 0       # next task to send
        self._rcvd_idx = 0       # next task to hand out
        self._task_info = {}     # task -> (worker,) while pending, (worker, data) once it arrived early
        self._workers_status = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first:  # persistent workers: a new epoch
            for index_queue in self._index_queues:
                index_queue.put(_worker.ResumeIteration())
            resumed = 0
            while resumed < self._num_workers:
                task, _ = self._get_data()
                if isinstance(task, _worker.ResumeIteration):
                    resumed += 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return  # every worker's stream has ended
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._send_idx += 1

    def _get_data(self):
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _POLL_INTERVAL if deadline is None else min(_POLL_INTERVAL, max(deadline - time.monotonic(), 0))
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                pass
            dead = [w for w in self._workers if not w.is_alive()]
            if dead:
                descriptions = ", ".join(f"pid {w.pid} {_exit_description(w)}" for w in dead)
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader worker ({descriptions}). See the worker's output above for its "
                                   "error; a signal such as SIGKILL often means it ran out of memory")
            if deadline is not None and time.monotonic() >= deadline:
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        while True:
            # Skip tasks of workers whose stream ended (they will never answer).
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                return self._process(self._task_info.pop(self._rcvd_idx)[1])
            task, data = self._get_data()
            if isinstance(data, _worker.IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if task != self._rcvd_idx:
                self._task_info[task] += (data,)  # early: kept until its turn
                continue
            del self._task_info[task]
            return self._process(data)

    def _process(self, data):
        self._rcvd_idx += 1
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return self._loader._pinned(data)

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        self._done_event.set()
        for index_queue in self._index_queues:
            try:
                index_queue.put(None)
            except (OSError, ValueError):
                pass
        for worker in self._workers:
            worker.join(_worker.STATUS_CHECK_INTERVAL)
            if worker.is_alive():
                worker.terminate()
                worker.join(5)
        for q in self._index_queues + [self._result_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:  # interpreter shutdown: best effort
            pass
