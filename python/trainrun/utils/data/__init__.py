"""trainrun.utils.data: PyTorch's datasets, samplers and DataLoader.

With an explicit trainrun.Generator (or DistributedSampler's seed) the
orders are PyTorch 1.13's for the same seed. DataLoader loads in the calling
process (num_workers=0) or in worker processes whose batches arrive through
shared memory (num_workers=N), the same batches in the same order."""
from trainrun.utils.data._utils.collate import default_collate, default_convert
from trainrun.utils.data._worker import WorkerInfo, get_worker_info
from trainrun.utils.data.dataloader import DataLoader
from trainrun.utils.data.dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset,
                                         Subset, TensorDataset, random_split)
from trainrun.utils.data.distributed import DistributedSampler
from trainrun.utils.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                                         SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
           "SubsetRandomSampler", "TensorDataset", "WorkerInfo", "default_collate", "default_convert",
           "get_worker_info", "random_split", "WeightedRandomSampler"]
