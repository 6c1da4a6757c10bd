"""torch.distributed.elastic.utils.data: ElasticDistributedSampler (resume an epoch part-way, after a restart)
and CyclingIterator (several epochs as one iterator)."""
from trainrun.distributed.elastic.utils.data.cycling_iterator import CyclingIterator  # noqa: F401
from trainrun.distributed.elastic.utils.data.elastic_distributed_sampler import ElasticDistributedSampler  # noqa: F401
