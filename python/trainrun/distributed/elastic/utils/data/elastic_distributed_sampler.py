"""ElasticDistributedSampler, as PyTorch's: a DistributedSampler over the dataset's indices from start_index on
(where a restarted job resumes its epoch), shuffled by the epoch (set_epoch) with the same draws as PyTorch's, and
padded with the first indices so every rank gets as many."""
import math

from trainrun.utils.data.distributed import DistributedSampler


class ElasticDistributedSampler(DistributedSampler):
    def __init__(self, dataset, num_replicas=None, rank=None, start_index=0):
        super().__init__(dataset=dataset, num_replicas=num_replicas, rank=rank)
        if start_index >= len(dataset):
            raise ValueError(f"Start index {start_index} should be less than dataset size {len(dataset)}")
        self.start_index = start_index
        self.num_samples = math.ceil((len(dataset) - start_index) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        import trainrun
        generator = trainrun.Generator()
        generator.manual_seed(self.epoch)
        order = (trainrun.randperm(len(self.dataset) - self.start_index, generator=generator)
                 + self.start_index).tolist()
        order += order[:self.total_size - len(order)]  # (padding: every rank takes num_samples)
        return iter(order[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
