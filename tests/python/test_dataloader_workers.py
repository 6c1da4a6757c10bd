"""DataLoader with worker processes: the same batches in the same order as
num_workers=0, batches in shared memory, PyTorch's seeds and worker info,
errors with the worker's traceback, dead and slow workers named, persistent
workers, and DistributedSampler under workers."""
import os
import signal
import time

import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun  # noqa: E402
from trainrun.utils import data  # noqa: E402

try:
    import torch.utils.data._utils.worker as torch_worker
except ImportError:  # pragma: no cover
    torch_worker = None


class Squares(data.Dataset):
    def __init__(self, n=37, fail_at=None, kill_at=None, sleep_at=None):
        self.n, self.fail_at, self.kill_at, self.sleep_at = n, fail_at, kill_at, sleep_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"sample {i} is unreadable")
        if i == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if i == self.sleep_at:
            time.sleep(30)
        return {"x": trainrun.full((3,), float(i * i)), "i": i}


class Stream(data.IterableDataset):
    """Splits its range between workers through get_worker_info(), as PyTorch's docs do."""

    def __iter__(self):
        info = data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, 20, step))


class WhoAmI(data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = data.get_worker_info()
        return [os.getpid(), info.id, info.seed, int(trainrun.initial_seed()), float(np.random.rand())]


def batches(loader):
    return [(b["i"].tolist(), b["x"].tolist()) for b in loader]


@pytest.mark.parametrize("context", [None, "spawn"])
def test_workers_give_the_batches_of_num_workers_0_in_the_same_order(context):
    def loader(workers):
        g = trainrun.Generator()
        g.manual_seed(7)
        return data.DataLoader(Squares(), batch_size=5, shuffle=True, generator=g, num_workers=workers,
                               multiprocessing_context=context)
    expected = batches(loader(0))
    got = list(loader(2))
    assert [(b["i"].tolist(), b["x"].tolist()) for b in got] == expected
    assert all(b["x"].is_shared() for b in got)  # arrived through shared memory


def test_spawned_workers_take_a_dataset_of_tensors():
    # The dataset's tensors go to each spawned worker as shared-memory descriptors; two storages of one shared
    # segment pass that descriptor once (a spawn refuses it twice).
    dataset = data.TensorDataset(trainrun.arange(10.0).unsqueeze(1), trainrun.arange(10))
    loader = data.DataLoader(dataset, batch_size=5, num_workers=2, multiprocessing_context="spawn")
    assert [labels.tolist() for _, labels in loader] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert [x.reshape(-1).tolist() for x, _ in loader][1] == [5.0, 6.0, 7.0, 8.0, 9.0]


def test_iterable_dataset_batches_interleave_by_worker_as_in_pytorch():
    got = [b.tolist() for b in data.DataLoader(Stream(), batch_size=3, num_workers=2)]
    assert got == [[0, 2, 4], [1, 3, 5], [6, 8, 10], [7, 9, 11], [12, 14, 16], [13, 15, 17], [18], [19]]
    assert list(data.DataLoader(Stream(), batch_size=None, num_workers=2))[:4] == [0, 1, 2, 3]


def test_worker_info_seeds_and_init_fn():
    g = trainrun.Generator()
    g.manual_seed(11)
    calls = trainrun.zeros(2).share_memory_()

    def init(worker_id):
        calls[worker_id] += 1

    loader = data.DataLoader(WhoAmI(), batch_size=2, num_workers=2, generator=g, worker_init_fn=init)
    rows = [row for batch in loader for row in zip(*[c.tolist() if hasattr(c, "tolist") else c for c in batch])]
    g2 = trainrun.Generator()
    g2.manual_seed(11)
    base_seed = g2._random63()  # what the loader drew for this pass
    by_worker = {row[1]: row for row in rows}
    assert set(by_worker) == {0, 1} and len({row[0] for row in rows}) == 2, rows  # two processes
    for worker_id, row in by_worker.items():
        assert row[2] == base_seed + worker_id and row[3] == base_seed + worker_id
    assert calls.tolist() == [1.0, 1.0]
    assert data.get_worker_info() is None  # in the main process


@pytest.mark.skipif(torch_worker is None, reason="PyTorch (python3-torch) is not installed")
def test_numpy_seeds_in_workers_are_pytorchs():
    from trainrun.utils.data._worker import numpy_seed
    for base_seed in (0, 1, 2**62 + 12345, 987654321987):
        for worker_id in range(3):
            assert numpy_seed(base_seed, worker_id) == torch_worker._generate_state(base_seed, worker_id)


def test_a_worker_error_arrives_with_its_traceback():
    loader = data.DataLoader(Squares(fail_at=12), batch_size=5, num_workers=2)
    with pytest.raises(ValueError) as info:
        list(loader)
    message = str(info.value)
    assert "Caught ValueError in DataLoader worker process 0" in message
    assert "sample 12 is unreadable" in message and "__getitem__" in message


def test_a_dead_worker_is_named_with_its_signal():
    loader = data.DataLoader(Squares(kill_at=6), batch_size=5, num_workers=2)
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid \d+ is killed by signal: SIGKILL"):
        list(loader)


def test_timeout_names_the_wait():
    loader = data.DataLoader(Squares(sleep_at=0), batch_size=5, num_workers=1, timeout=1)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 1 seconds"):
        next(iter(loader))
    assert time.monotonic() - started < 20


def test_persistent_workers_stay_across_epochs():
    loader = data.DataLoader(WhoAmI(), batch_size=4, num_workers=2, persistent_workers=True, prefetch_factor=1)
    pids = [{int(p) for b in loader for p in b[0].tolist()} for _ in range(3)]
    assert len(pids[0]) == 2 and pids[0] == pids[1] == pids[2]
    fresh = data.DataLoader(WhoAmI(), batch_size=4, num_workers=2)
    assert {int(p) for b in fresh for p in b[0].tolist()} != {int(p) for b in fresh for p in b[0].tolist()}


def test_distributed_sampler_composes_with_workers():
    dataset = Squares(n=23)
    for rank in range(2):
        sampler = data.DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=True, seed=3)
        sampler.set_epoch(4)
        here = batches(data.DataLoader(dataset, batch_size=4, sampler=sampler))
        sampler.set_epoch(4)
        assert batches(data.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=2)) == here
