"""trainrun.utils.data: PyTorch's datasets, samplers and DataLoader.

With an explicit trainrun.Generator (or DistributedSampler's seed) the
orders are PyTorch 1.13's for the same seed. DataLoader runs in the calling
process (num_workers=0); worker processes come with tensor sharing between
processes."""
from trainrun.utils.data._collate import default_collate, default_convert
from trainrun.utils.data.dataloader import DataLoader
from trainrun.utils.data.dataset import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                                         random_split)
from trainrun.utils.data.distributed import DistributedSampler
from trainrun.utils.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                                         SubsetRandomSampler)

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler", "IterableDataset",
           "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
           "default_collate", "default_convert", "random_split"]
