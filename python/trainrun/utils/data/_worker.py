"""What runs inside a DataLoader worker process: seeding, get_worker_info(),
the loop that turns index lists into batches, and the wrapper that carries a
worker's exception (with its traceback) to the main process."""
import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass

import numpy as np

import trainrun

# How often a waiting worker checks that its parent is still alive.
STATUS_CHECK_INTERVAL = 5.0


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info = None


def get_worker_info():
    """In a DataLoader worker: its WorkerInfo (id, num_workers, seed, dataset, the worker's own copy).
    In the main process: None. An IterableDataset uses it to split its stream between workers."""
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker, re-raised in the main process with the worker's traceback."""

    def __init__(self, exc_info=None, where="in background"):
        exc_info = exc_info or sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:  # KeyError repr()s its message: keep the traceback readable
            msg = KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except TypeError:  # an exception type whose constructor takes other arguments
            raise RuntimeError(msg) from None
        raise exception


class KeyErrorMessage(str):
    def __repr__(self):
        return self


@dataclass(frozen=True)
class IterableDatasetStopIteration:
    worker_id: int


@dataclass(frozen=True)
class ResumeIteration:
    """Sent to persistent workers at a new epoch: start the dataset's iterator again."""


def numpy_seed(base_seed, worker_id):
    """PyTorch's seed for NumPy in a worker (worker._generate_state): a SeedSequence-style hash of
    (worker_id, base_seed) into four 32-bit words, so NumPy draws in workers match PyTorch's."""
    mask = 0xFFFFFFFF
    xshift = 16
    entropy = [worker_id, base_seed & mask, base_seed >> 32, 0]
    hash_const_a = 0x43b0d7e5

    def hash_value(value):
        nonlocal hash_const_a
        value = (value ^ hash_const_a) & mask
        hash_const_a = (hash_const_a * 0x931e8875) & mask
        value = (value * hash_const_a) & mask
        return (value ^ (value >> xshift)) & mask

    def mix(x, y):
        result = (((0xca01f9dd * x) & mask) - ((0x4973f715 * y) & mask)) & mask
        return (result ^ (result >> xshift)) & mask

    pool = [hash_value(e) for e in entropy]
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hash_value(pool[i_src]))
    hash_const_b = 0x8b51f9dd
    state = []
    for value in pool:
        value = (value ^ hash_const_b) & mask
        hash_const_b = (hash_const_b * 0x58f38ded) & mask
        value = (value * hash_const_b) & mask
        state.append((value ^ (value >> xshift)) & mask)
    return state


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, index):
        if self.auto_collation:
            return self.collate_fn([self.dataset[i] for i in index])
        return self.collate_fn(self.dataset[index])


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, batch_size, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation, self.collate_fn = auto_collation, collate_fn
        self.batch_size, self.drop_last = batch_size, drop_last
        self.ended = False

    def fetch(self, _):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        batch = []
        for sample in self.iterator:
            batch.append(sample)
            if len(batch) == self.batch_size:
                break
        else:
            self.ended = True
        if not batch or (self.drop_last and len(batch) < self.batch_size):
            raise StopIteration
        return self.collate_fn(batch)


def _make_fetcher(iterable, dataset, auto_collation, collate_fn, batch_size, drop_last):
    if iterable:
        return _IterableFetcher(dataset, auto_collation, collate_fn, batch_size, drop_last)
    return _MapFetcher(dataset, auto_collation, collate_fn)


def worker_loop(iterable, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn, batch_size,
                drop_last, base_seed, init_fn, worker_id, num_workers, parent_pid):
    """Takes (task index, sample indices) from index_queue and puts (task index, batch or
    ExceptionWrapper) on data_queue, until it gets None or its parent dies."""
    global _worker_info
    try:
        seed = base_seed + worker_id
        random.seed(seed)
        trainrun.manual_seed(seed)
        np.random.seed(numpy_seed(base_seed, worker_id))
        trainrun.set_num_threads(1)  # N workers already share the cores with the trainer
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = _make_fetcher(iterable, dataset, auto_collation, collate_fn, batch_size, drop_last)
        except Exception:
            init_error = ExceptionWrapper(where=where)
        iteration_end = False
        while os.getppid() == parent_pid:
            try:
                task = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                continue
            if isinstance(task, ResumeIteration):
                data_queue.put((task, None))
                iteration_end = False
                if init_error is None:
                    fetcher = _make_fetcher(iterable, dataset, auto_collation, collate_fn, batch_size, drop_last)
                continue
            if task is None:  # shut down
                break
            if done_event.is_set() or iteration_end:
                continue
            task_index, indices = task
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(indices)
                except StopIteration:
                    if not iterable:
                        data = ExceptionWrapper(where=where)
                    else:
                        data = IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                except Exception:
                    data = ExceptionWrapper(where=where)
            data_queue.put((task_index, data))
            del data, indices, task
    except KeyboardInterrupt:
        pass  # the main process is stopping: exit quietly
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()
