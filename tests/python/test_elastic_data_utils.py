"""torch.distributed.elastic.utils.data: ElasticDistributedSampler (an epoch resumed from start_index, shuffled
by the epoch, padded so every rank gets as many) and CyclingIterator, next to PyTorch 1.13's."""
import pytest
from built_tree import needs_torch, torch as peer  # noqa: F401

from trainrun.distributed.elastic.utils.data import CyclingIterator, ElasticDistributedSampler


def _orders(sampler_class, dataset, epoch):
    orders = []
    for rank in range(3):
        sampler = sampler_class(dataset, num_replicas=3, rank=rank, start_index=5)
        sampler.set_epoch(epoch)
        orders.append((len(sampler), list(sampler)))
    return orders


def test_sampler_resumes_from_start_index_and_covers_the_rest():
    orders = _orders(ElasticDistributedSampler, list(range(23)), epoch=2)
    assert all(n == 6 and len(order) == 6 for n, order in orders)
    seen = [i for _, order in orders for i in order]
    assert set(seen) == set(range(5, 23)) and len(seen) == 18  # 18 indices: no padding needed
    assert _orders(ElasticDistributedSampler, list(range(23)), epoch=3) != orders  # reshuffled by the epoch
    with pytest.raises(ValueError, match="Start index 23 should be less than dataset size 23"):
        ElasticDistributedSampler(list(range(23)), num_replicas=2, rank=0, start_index=23)


@needs_torch
def test_sampler_draws_pytorchs_order():
    from torch.distributed.elastic.utils.data import ElasticDistributedSampler as Theirs
    for size, epoch in ((23, 2), (10, 0)):
        assert _orders(ElasticDistributedSampler, list(range(size)), epoch) == \
            _orders(Theirs, list(range(size)), epoch)


def test_cycling_iterator_runs_the_epochs_in_turn():
    assert list(CyclingIterator(3, lambda epoch: iter([epoch, 10 * epoch]), start_epoch=1)) == [1, 10, 2, 20]
    assert list(CyclingIterator(2, lambda epoch: iter([]))) == []
