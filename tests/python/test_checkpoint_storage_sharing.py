"""torch.save's storage semantics, both ways with PyTorch 1.13: a storage is written once however many tensors
view it, and loading gives tensors that share one storage again, with their strides and offsets (tied weights
stay tied, a view stays a view); Parameters come back as Parameters; bfloat16 and non-contiguous tensors keep
their values."""
import io

import numpy as np

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402


def _saved(torch, obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def _objects(t):
    base = t.arange(12.0).reshape(3, 4)
    tied = t.nn.Parameter(t.ones(2, 2))
    return {"base": base, "column": base[:, 1], "transposed": base.t(), "tail": base.view(-1)[5:],
            "tied_a": tied, "tied_b": tied, "bf16": t.tensor([1.5, -2.25], dtype=t.bfloat16)}


def _check_loaded(t, loaded):
    assert loaded["column"].stride() == (4,) and loaded["column"].storage_offset() == 1
    assert loaded["transposed"].stride() == (1, 4) and not loaded["transposed"].is_contiguous()
    loaded["base"][0, 1] = 100.0  # one storage behind every view of it
    assert loaded["column"][0].item() == 100.0 and loaded["transposed"][1, 0].item() == 100.0
    loaded["base"][1, 2] = -7.0
    assert loaded["tail"][1].item() == -7.0
    assert isinstance(loaded["tied_a"], t.nn.Parameter) and loaded["tied_a"].requires_grad
    with t.no_grad():
        loaded["tied_a"][0, 0] = 5.0
    assert loaded["tied_b"][0, 0].item() == 5.0
    assert loaded["bf16"].dtype == t.bfloat16 and loaded["bf16"].float().tolist() == [1.5, -2.25]


def test_trainrun_round_trip_keeps_views_and_ties():
    buffer = _saved(trainrun, _objects(trainrun))
    _check_loaded(trainrun, trainrun.load(buffer, weights_only=False))
    import zipfile
    records = [n for n in zipfile.ZipFile(_saved(trainrun, _objects(trainrun))).namelist() if "/data/" in n]
    assert len(records) == 3  # the base, the tied parameter, the bfloat16 tensor: one record per storage


@needs_torch
def test_pytorch_reads_trainruns_views_and_ties():
    _check_loaded(peer, peer.load(_saved(trainrun, _objects(trainrun))))


@needs_torch
def test_trainrun_reads_pytorchs_views_and_ties():
    _check_loaded(trainrun, trainrun.load(_saved(peer, _objects(peer)), weights_only=False))
    values = trainrun.load(_saved(peer, {"x": peer.arange(10.0)[2:8:3]}))["x"]
    assert np.array_equal(values.numpy(), [2.0, 5.0])
