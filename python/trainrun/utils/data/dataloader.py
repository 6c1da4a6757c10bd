"""DataLoader: batches from a dataset through a sampler and a collate function."""
import trainrun
from trainrun._generator import default_generator
from trainrun.utils.data._utils.collate import default_collate, default_convert
from trainrun.utils.data.dataset import IterableDataset
from trainrun.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler


class DataLoader:
    """PyTorch's DataLoader. num_workers=0 loads in the calling process;
    num_workers=N loads in N worker processes (_multiprocessing_iter.py)
    and gives the same batches in the same order.

    batch_size=None turns batching off (each sample is converted, not
    collated). With shuffle=True and a trainrun.Generator, the order is
    PyTorch's for the same seed, epoch after epoch."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        # in_order=False lets PyTorch hand out a batch a faster worker finished first; here batches always come
        # in the sampler's order, which that setting allows too.
        self.in_order = in_order
        if num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing")
        if num_workers == 0 and (prefetch_factor is not None or persistent_workers):
            raise ValueError("prefetch_factor option could only be specified in multiprocessing. let num_workers > "
                             "0 to enable multiprocessing" if prefetch_factor is not None else
                             "persistent_workers option needs num_workers > 0")
        if prefetch_factor is not None and prefetch_factor <= 0:
            raise ValueError(f"DataLoader: prefetch_factor must be positive, got {prefetch_factor}")
        if timeout < 0:
            raise ValueError("DataLoader: timeout option should be non-negative")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = (2 if prefetch_factor is None else prefetch_factor) if num_workers > 0 else None
        self.persistent_workers = persistent_workers
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self._workers_iterator = None
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.generator = generator
        if isinstance(dataset, IterableDataset):
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            if sampler is not None and shuffle:
                raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is None and not isinstance(dataset, IterableDataset):
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not isinstance(dataset, IterableDataset):
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if batch_size is not None or batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    def __iter__(self):
        # PyTorch draws its workers' base seed (one int64) from the generator
        # at every pass, before the sampler's draws: keep the stream in step.
        base_seed = (self.generator if self.generator is not None else default_generator)._random63()
        if self.num_workers > 0:
            return self._iterate_in_workers(base_seed)
        return self._iterate_here()

    def _iterate_in_workers(self, base_seed):
        from trainrun.utils.data._multiprocessing_iter import MultiProcessingDataLoaderIter
        if not self.persistent_workers:
            return MultiProcessingDataLoaderIter(self, base_seed)
        if self._workers_iterator is None:
            self._workers_iterator = MultiProcessingDataLoaderIter(self, base_seed)
        else:
            self._workers_iterator._reset()
        return self._workers_iterator

    def _iterate_here(self):
        if isinstance(self.dataset, IterableDataset):
            yield from (self._pinned(b) for b in self._iterate_stream())
            return
        if self._auto_collation:
            for indices in self.batch_sampler:
                yield self._pinned(self.collate_fn([self.dataset[i] for i in indices]))
        else:
            for i in self.sampler:
                yield self._pinned(self.collate_fn(self.dataset[i]))

    def _pinned(self, batch):
        """pin_memory=True: the batch's tensors in page-locked memory (when a
        GPU is usable; without one PyTorch ignores the option too)."""
        if not self.pin_memory or not trainrun.cuda.is_available():
            return batch
        if trainrun._C._is_cpp_tensor(batch):
            return batch.pin_memory()
        if isinstance(batch, dict):
            return type(batch)((k, self._pinned(v)) for k, v in batch.items())
        if isinstance(batch, tuple) and hasattr(batch, "_fields"):
            return type(batch)(*(self._pinned(v) for v in batch))
        if isinstance(batch, (list, tuple)):
            return type(batch)(self._pinned(v) for v in batch)
        return batch

    def _iterate_stream(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # raises TypeError when the stream has no length, as PyTorch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self._auto_collation else len(self.sampler)
