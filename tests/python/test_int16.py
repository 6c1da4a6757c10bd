"""int16 (torch.short) as PyTorch has it: the dtype, its promotion with every other dtype (the whole table equal to
PyTorch 1.13's), arithmetic that wraps as int16 does, sums in int64, conversions, view(dtype) between same-size
dtypes (bfloat16 memory as int16), NumPy, torch.save interchange with PyTorch, and Gloo collectives and a
distributed checkpoint of int16 tensors on 2 ranks."""
import tempfile

import numpy as np
import pytest

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@needs_torch
def test_promotion_table_equals_pytorch():
    for a in NAMES:
        for b in NAMES:
            ours = trainrun.promote_types(getattr(trainrun, a), getattr(trainrun, b))
            theirs = peer.promote_types(getattr(peer, a), getattr(peer, b))
            assert str(ours).split(".")[-1] == str(theirs).split(".")[-1], (a, b, ours, theirs)


# Each case runs on trainrun and on PyTorch (`t` is the module); results are compared as Python values.
CASES = {
    "values and wrap": lambda t: (t.tensor([32767, -2], dtype=t.int16) + 1).tolist(),
    "short alias": lambda t: str(t.tensor([1], dtype=t.short).dtype).split(".")[-1],
    "uint8 + int8": lambda t: str((t.ones(2, dtype=t.uint8) + t.ones(2, dtype=t.int8)).dtype).split(".")[-1],
    "int16 + int number": lambda t: ((t.ones(2, dtype=t.int16) + 7).tolist(), str((t.ones(1, dtype=t.int16) + 7).dtype)[-5:]),
    "int16 + float number": lambda t: str((t.ones(2, dtype=t.int16) + 1.5).dtype).split(".")[-1],
    "sum is int64": lambda t: (str(t.tensor([30000, 30000], dtype=t.int16).sum().dtype).split(".")[-1],
                               t.tensor([30000, 30000], dtype=t.int16).sum().item()),
    "true and floor division, remainder": lambda t: ((t.tensor([7, -7], dtype=t.int16) / 2).tolist(),
                                                     (t.tensor([7, -7], dtype=t.int16) // 2).tolist(),
                                                     (t.tensor([7, -7], dtype=t.int16) % 3).tolist()),
    "product": lambda t: (t.tensor([300, -4], dtype=t.int16) * t.tensor([200, 6], dtype=t.int16)).tolist(),
    "float to int16 truncates": lambda t: t.tensor([7.9, -7.9]).short().tolist(),
    "sort, max, argmax, cumsum": lambda t: (t.tensor([3, 9, 1], dtype=t.int16).sort().values.tolist(),
                                            t.tensor([3, 9, 1], dtype=t.int16).max().item(),
                                            t.tensor([3, 9, 1], dtype=t.int16).argmax().item(),
                                            t.tensor([3, 9, 1], dtype=t.int16).cumsum(0).tolist()),
    "bitwise and shift": lambda t: ((t.tensor([6], dtype=t.int16) & 3).tolist(), (t.tensor([6], dtype=t.int16) << 2).tolist()),
    "abs, neg, clamp, pow": lambda t: (t.tensor([-6], dtype=t.int16).abs().tolist(), (-t.tensor([6], dtype=t.int16)).tolist(),
                                       t.tensor([-5, 5], dtype=t.int16).clamp(-2, 2).tolist(),
                                       (t.tensor([3], dtype=t.int16) ** 2).tolist()),
    "factories": lambda t: (t.zeros(2, dtype=t.int16).tolist(), t.arange(5, dtype=t.int16).tolist(),
                            str(t.randint(0, 5, (3,), dtype=t.int16).dtype).split(".")[-1]),
    "indexing, where, unique, bincount": lambda t: (
        t.tensor([1, 2, 3], dtype=t.int16)[t.tensor([2, 0])].tolist(),
        t.where(t.tensor([True, False]), t.tensor([1, 2], dtype=t.int16), t.tensor([5, 6], dtype=t.int16)).tolist(),
        t.unique(t.tensor([3, 1, 3], dtype=t.int16)).tolist(), t.bincount(t.tensor([1, 1, 3], dtype=t.int16)).tolist()),
    "cat with uint8": lambda t: str(t.cat([t.ones(1, dtype=t.int16), t.ones(1, dtype=t.uint8)]).dtype).split(".")[-1],
    "iinfo": lambda t: (t.iinfo(t.int16).max, t.iinfo(t.int16).min, t.iinfo(t.int16).bits),
    "dtype properties": lambda t: (t.int16.is_signed, t.int16.is_floating_point, t.uint8.is_signed,
                                   t.int16.is_complex),
    "legacy ShortTensor": lambda t: t.ShortTensor([1, 2]).dtype == t.int16,
    "can_cast": lambda t: (t.can_cast(t.int16, t.int8), t.can_cast(t.float32, t.int16), t.can_cast(t.int16, t.bool)),
    "repr": lambda t: repr(t.tensor([1, 2], dtype=t.int16)).replace("trainrun", "torch"),
    "bfloat16 memory viewed as int16 and back": lambda t: _viewed(t),
}


def _viewed(t):
    x = t.tensor([1.0, -2.5, 3.0]).to(t.bfloat16)
    bits = x.view(t.int16)
    bits[0] = 0  # the same memory: x changes
    return bits.tolist(), bits.view(t.bfloat16).tolist(), x.tolist(), t.arange(6.).view(2, 3).t().view(t.int32).tolist()


@needs_torch
@pytest.mark.parametrize("name", list(CASES))
def test_int16_behaves_as_pytorch(name):
    assert CASES[name](trainrun) == CASES[name](peer)


def test_numpy_both_ways():
    t = trainrun.from_numpy(np.array([1, -2, 300], dtype=np.int16))
    assert t.dtype == trainrun.int16 and t.tolist() == [1, -2, 300]
    assert t.numpy().dtype == np.int16
    assert trainrun.tensor([1, 2], dtype=trainrun.int16).element_size() == 2


@needs_torch
def test_saved_files_load_in_pytorch_and_back(tmp_path):
    trainrun.save({"a": trainrun.tensor([1, -2, 300], dtype=trainrun.int16)}, tmp_path / "ours.pt")
    loaded = peer.load(tmp_path / "ours.pt")["a"]
    assert loaded.dtype == peer.int16 and loaded.tolist() == [1, -2, 300]
    peer.save({"a": peer.tensor([4, -5], dtype=peer.int16)}, tmp_path / "theirs.pt")
    back = trainrun.load(tmp_path / "theirs.pt")["a"]
    assert back.dtype == trainrun.int16 and back.tolist() == [4, -5]
    trainrun.save({"s": trainrun.tensor([9, -9], dtype=trainrun.int16)}, tmp_path / "w.safetensors")
    assert trainrun.load(tmp_path / "w.safetensors")["s"].tolist() == [9, -9]


def int16_collectives_and_checkpoint():
    from trainrun import distributed as dist
    import trainrun.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = trainrun.tensor([1000, -3], dtype=trainrun.int16) * (rank + 1)
    dist.all_reduce(t)
    assert t.dtype == trainrun.int16 and t.tolist() == [3000, -9], t
    m = trainrun.tensor([rank + 5], dtype=trainrun.int16)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    assert m.tolist() == [6]
    gathered = [trainrun.zeros(2, dtype=trainrun.int16) for _ in range(2)]
    dist.all_gather(gathered, trainrun.tensor([rank, -rank], dtype=trainrun.int16))
    assert [g.tolist() for g in gathered] == [[0, 0], [1, -1]]
    where = [tempfile.mkdtemp() if rank == 0 else None]
    dist.broadcast_object_list(where)
    dcp.save({"x": trainrun.arange(4, dtype=trainrun.int16)}, checkpoint_id=where[0])
    state = {"x": trainrun.zeros(4, dtype=trainrun.int16)}
    dcp.load(state, checkpoint_id=where[0])
    assert state["x"].dtype == trainrun.int16 and state["x"].tolist() == [0, 1, 2, 3]
    dist.destroy_process_group()


def test_int16_collectives_on_two_ranks(ranks):
    ranks.run_function(2, int16_collectives_and_checkpoint)
