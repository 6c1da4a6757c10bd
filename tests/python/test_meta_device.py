"""The meta device from Python: `with trainrun.device("meta")` and
set_default_device for factories and layers, PyTorch's repr, Module.to_empty
(ties, requires_grad, buffers), nn.init on meta tensors, trunc_normal_'s
inverse-CDF draw, and sharded initialisation: a DTensor initialised piece by
piece on each rank equals the whole tensor initialised in one process."""
import threading

import numpy as np
import pytest
from built_tree import needs_torch, torch

import trainrun as tr
from trainrun import nn


def test_factories_and_layers_follow_the_default_device():
    before = tr._C._cpu_memory_allocated()
    with tr.device("meta"):
        layer = nn.Linear(4096, 4096)  # 64 MiB if it were real
        made = [tr.zeros(3), tr.randn(2, 2), tr.empty(5), tr.ones(2), tr.full((2,), 7.0), tr.arange(4),
                tr.tensor([1.0, 2.0]), nn.LayerNorm(8).weight, nn.Embedding(10, 4).weight, nn.RMSNorm(8).weight]
        with tr.device("cpu"):
            inner = tr.zeros(2)
        after_inner = tr.zeros(2)
        explicit = tr.zeros(2, device="cpu")
    assert tr._C._cpu_memory_allocated() - before < 4096
    assert layer.weight.is_meta and layer.bias.is_meta and all(t.is_meta for t in made)
    assert inner.device.type == "cpu" and after_inner.is_meta and explicit.device.type == "cpu"
    assert tr.zeros(2).device.type == "cpu" and str(tr.get_default_device()) == "cpu"
    assert nn.Linear(2, 3, device="meta").weight.is_meta
    tr.set_default_device("meta")
    try:
        assert tr.ones(2).is_meta
        seen = []
        worker = threading.Thread(target=lambda: seen.append(tr.ones(2).device.type))  # per thread, as PyTorch's
        worker.start()
        worker.join()
        assert seen == ["cpu"]
    finally:
        tr.set_default_device(None)
    assert tr.ones(2).device.type == "cpu"


def test_meta_tensors_compute_shapes_and_refuse_data():
    x = tr.empty(4, 8, device="meta")
    y = tr.nn.functional.softmax(x @ tr.empty(8, 3, device="meta") + 1, dim=-1).sum(0)
    assert y.is_meta and tuple(y.shape) == (3,) and y.dtype == tr.float32
    assert x.data_ptr() == 0 and x.device == tr.device("meta") and x.device.type == "meta"
    for take in (lambda: x.cpu(), lambda: x.numpy(), lambda: x.tolist(), lambda: x.sum().item()):
        with pytest.raises((RuntimeError, TypeError), match="meta tensor"):
            take()
    with pytest.raises(NotImplementedError, match="depends on the data"):
        x.nonzero()


@needs_torch
def test_repr_is_pytorchs():
    for shape, dtype in (((2, 3), "float32"), ((5,), "float64"), ((), "int64"), ((1, 0), "bool")):
        ours = repr(tr.empty(shape, device="meta", dtype=getattr(tr, dtype)))
        theirs = repr(torch.empty(shape, device="meta", dtype=getattr(torch, dtype)))
        assert ours == theirs.replace("torch.", "trainrun."), (ours, theirs)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.norm = nn.BatchNorm1d(6)
        self.head = nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight
        self.frozen = nn.Linear(6, 6)
        self.frozen.requires_grad_(False)


def test_to_empty_materialises_keeping_ties_flags_and_buffers():
    with tr.device("meta"):
        model = Tied()
    assert model.to_empty(device="cpu") is model
    assert not any(t.is_meta for t in list(model.parameters()) + list(model.buffers()))
    assert model.head.weight.data_ptr() == model.embed.weight.data_ptr()  # still one tensor
    assert [p.requires_grad for p in model.frozen.parameters()] == [False, False]
    assert model.embed.weight.requires_grad and model.norm.running_mean.shape == (6,)
    assert model.norm.running_mean.dtype == tr.float32 and model.norm.num_batches_tracked.dtype == tr.int64


def test_reset_parameters_after_to_empty_redraws_the_eager_initialisation():
    tr.manual_seed(5)
    eager = nn.Linear(7, 5)
    with tr.device("meta"):
        lazy = nn.Linear(7, 5)
    lazy.to_empty(device="cpu")
    tr.manual_seed(5)
    lazy.reset_parameters()
    np.testing.assert_array_equal(eager.weight.detach().numpy(), lazy.weight.detach().numpy())
    np.testing.assert_array_equal(eager.bias.detach().numpy(), lazy.bias.detach().numpy())
    meta = tr.empty(3, 3, device="meta")
    for init in (nn.init.normal_, nn.init.uniform_, nn.init.zeros_, nn.init.trunc_normal_, nn.init.xavier_uniform_):
        assert init(meta) is meta and meta.is_meta


def test_trunc_normal_is_a_truncated_normal():
    tr.manual_seed(0)
    t = nn.init.trunc_normal_(tr.empty(200000), mean=1.0, std=2.0, a=-1.0, b=2.0)
    v = t.numpy().astype(np.float64)
    assert v.min() >= -1.0 and v.max() <= 2.0
    # The truncated normal's mean: mu + sigma (phi(alpha) - phi(beta)) / (Phi(beta) - Phi(alpha))
    from math import erf, exp, pi, sqrt
    alpha, beta = (-1.0 - 1.0) / 2.0, (2.0 - 1.0) / 2.0
    phi = lambda z: exp(-z * z / 2) / sqrt(2 * pi)  # noqa: E731
    cdf = lambda z: (1 + erf(z / sqrt(2))) / 2  # noqa: E731
    expected = 1.0 + 2.0 * (phi(alpha) - phi(beta)) / (cdf(beta) - cdf(alpha))
    assert abs(v.mean() - expected) < 0.01, (v.mean(), expected)
    with pytest.raises(ValueError, match="std > 0"):
        nn.init.trunc_normal_(tr.empty(3), std=0.0)


@needs_torch
def test_erfinv_matches_pytorchs():
    from trainrun.nn.init import _erfinv
    y = np.concatenate([np.linspace(-0.999999, 0.999999, 20001), [-1e-12, 0.0, 1e-12]])
    ours = _erfinv(tr.tensor(y)).numpy()
    theirs = torch.erfinv(torch.tensor(y, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-14)  # (near +-1 erfinv is steep)


def sharded_initialisation_equals_the_whole():
    """On 2 ranks, each rank initialises only its piece of DTensors split along dim 0 or 1 (uneven sizes) or
    replicated; gathered, they equal the whole tensors initialised in one process from the same seed."""
    import trainrun.distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import DTensor, Replicate, Shard
    from trainrun.distributed.tensor._dtensor import DTensorSpec
    from trainrun.distributed.tensor._redistribute import local_shape
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2,))
    inits = [lambda t: nn.init.normal_(t, 0.5, 2.0), lambda t: nn.init.uniform_(t, -1.0, 1.0),
             lambda t: nn.init.trunc_normal_(t, std=0.02), nn.init.xavier_uniform_, lambda t: t.normal_()]
    for placement in (Shard(0), Shard(1), Replicate()):
        for shape in ((9, 7), (4, 13)):
            for dtype in (tr.float32, tr.float64):
                tr.manual_seed(21)
                wholes = [init(tr.empty(*shape, dtype=dtype)) for init in inits]
                tr.manual_seed(21)
                for init, whole in zip(inits, wholes):
                    sizes, _ = local_shape(shape, mesh, (placement,))
                    piece = DTensor(tr.empty(*sizes, dtype=dtype), DTensorSpec(mesh, (placement,), shape))
                    init(piece)
                    np.testing.assert_array_equal(piece.full_tensor().numpy(), whole.numpy())
    dist.destroy_process_group()


def test_sharded_initialisation_equals_the_whole(ranks):
    ranks.run_function(2, sharded_initialisation_equals_the_whole)


def tensor_parallel_mlp_built_on_meta():
    """On 2 ranks, an MLP built on the meta device, split by Colwise/RowwiseParallel, materialised and
    reset equals the same MLP built in memory in one process: the gathered weights bit for bit, and after one
    backward the same loss and clip_grad_norm_ (its shards' norms still combined over the ranks)."""
    import trainrun.distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2,))

    def mlp():
        return nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 6))
    tr.manual_seed(4)
    reference = mlp()
    with tr.device("meta"):
        model = mlp()
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    model.to_empty(device="cpu")
    tr.manual_seed(4)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.reset_parameters()
    for name in ("0.weight", "0.bias", "2.weight", "2.bias"):
        owner, leaf = name.split(".")
        ours = getattr(model.get_submodule(owner), leaf).full_tensor()
        np.testing.assert_array_equal(ours.detach().numpy(), getattr(reference[int(owner)], leaf).detach().numpy())
    x = tr.randn(3, 6)
    loss, ref_loss = model(x).square().sum(), reference(x).square().sum()
    loss.backward()
    ref_loss.backward()
    assert abs(loss.item() - ref_loss.item()) < 1e-4 * abs(ref_loss.item())
    norm, ref_norm = nn.utils.clip_grad_norm_(model.parameters(), 1e9), nn.utils.clip_grad_norm_(
        reference.parameters(), 1e9)
    assert abs(norm.item() - ref_norm.item()) < 1e-5 * ref_norm.item(), (norm.item(), ref_norm.item())
    dist.destroy_process_group()


def test_tensor_parallel_model_built_on_meta_equals_the_eager_one(ranks):
    ranks.run_function(2, tensor_parallel_mlp_built_on_meta)


@pytest.mark.parametrize("expression", [
    "torch.arange(30.)", "torch.arange(2000.) / 7", "torch.arange(2000)", "torch.arange(40.).reshape(2, 20) * 1000",
    "torch.arange(3000.).reshape(1000, 3)", "torch.tensor([1., 2000.])", "torch.tensor([0., 1000.])",
    "torch.arange(12.).reshape(3, 4).requires_grad_() * 1000", "torch.arange(30.).requires_grad_() * 2",
    "torch.arange(20.).double() / 3", "torch.arange(20.).double().requires_grad_()",
    "torch.tensor([], dtype=torch.long)", "torch.zeros(0, 3)", "torch.zeros(0, 3, dtype=torch.int32)",
    "torch.tensor([True, False] * 20)", "torch.arange(1000) - 500", "torch.zeros(3, device='meta', dtype=torch.int64)",
    "torch.zeros(3, device='meta', requires_grad=True)"])
@needs_torch
def test_long_rows_and_suffixes_wrap_as_pytorchs(expression):
    """Rows wrap at 80 columns (as many elements per line as fit), and suffixes (dtype, grad_fn) go on a line of
    their own where they would pass it; whole-number floats over a range above 1000 print in scientific form."""
    ours = repr(eval(expression, {"torch": tr}))  # noqa: S307  (our own expressions)
    assert ours.replace("trainrun.", "torch.") == repr(eval(expression, {"torch": torch}))  # noqa: S307
