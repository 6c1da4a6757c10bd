"""The import paths PyTorch scripts use for things trainrun keeps elsewhere: each path imports, holds the same
objects as the primary location, and those objects work (torch.cpu's device interface, torch.mps/xpu reporting
no device, torch.types' aliases, collate with a user's collate_fn_map, the legacy autograd profiler, ...)."""
import collections
import importlib
from datetime import timedelta

import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


@pytest.mark.parametrize("module,name,target", [
    ("trainrun.optim.adam", "Adam", "optim.Adam"), ("trainrun.optim.adamw", "AdamW", "optim.AdamW"),
    ("trainrun.optim.sgd", "SGD", "optim.SGD"), ("trainrun.optim.rmsprop", "RMSprop", "optim.RMSprop"),
    ("trainrun.optim.lbfgs", "LBFGS", "optim.LBFGS"), ("trainrun.optim.nadam", "NAdam", "optim.NAdam"),
    ("trainrun.optim.adam", "Optimizer", "optim.Optimizer"),
    ("trainrun.autograd.gradcheck", "gradcheck", "autograd.gradcheck"),
    ("trainrun.autograd.profiler", "record_function", "profiler.record_function"),
    ("trainrun.profiler.profiler", "profile", "profiler.profile"),
    ("trainrun.storage", "UntypedStorage", "UntypedStorage"),
    ("trainrun.nn.utils.spectral_norm", "spectral_norm", "nn.utils.spectral_norm"),
    ("trainrun.nn.utils.weight_norm", "remove_weight_norm", "nn.utils.remove_weight_norm"),
    ("trainrun.nn.utils.init", "skip_init", "nn.utils.skip_init"),
    ("trainrun.nn.utils.convert_parameters", "parameters_to_vector", "nn.utils.parameters_to_vector"),
    ("trainrun.nn.utils.memory_format", "convert_conv2d_weight_memory_format",
     "nn.utils.convert_conv2d_weight_memory_format"),
    ("trainrun.distributed.tensor.device_mesh", "init_device_mesh", "distributed.device_mesh.init_device_mesh"),
    ("trainrun.utils.data._utils.collate", "default_collate", "utils.data.default_collate"),
])
def test_path_holds_the_primary_object(module, name, target):
    obj = torch
    for part in target.split("."):
        obj = getattr(obj, part)
    assert getattr(importlib.import_module(module), name) is obj


def test_submodules_that_pytorch_shadows_with_functions_stay_functions():
    import trainrun.nn.utils.spectral_norm  # noqa: F401
    import trainrun.autograd.gradcheck  # noqa: F401
    assert callable(torch.nn.utils.spectral_norm) and callable(torch.autograd.gradcheck)
    assert torch.optim.adam.Adam is torch.optim.Adam  # (no function of that name: the module is the attribute)


def test_optimizer_from_its_module_path_trains():
    from trainrun.optim.sgd import SGD
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    opt = SGD([w], lr=0.5)
    (w * w).sum().backward()
    opt.step()
    assert w.tolist() == [0.0, 0.0]


def test_cpu_device_module():
    cpu = torch.cpu
    assert cpu.is_available() and cpu.device_count() == 1 and cpu.current_device() == "cpu"
    assert torch.get_device_module("cpu") is cpu
    cpu.synchronize()
    s = cpu.Stream()
    with cpu.stream(s):
        assert cpu.current_stream() is s
    assert cpu.current_stream() is not s
    event = s.record_event()
    assert event.query() and isinstance(event, cpu.Event)
    s.wait_stream(cpu.current_stream())
    from trainrun.cpu.amp import autocast
    with autocast():
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16


def test_absent_devices_say_so():
    for module in (torch.mps, torch.xpu):
        assert not module.is_available() and module.device_count() == 0
        module.manual_seed(0)  # (silent, as PyTorch's on a machine without the device)
        with pytest.raises(RuntimeError, match="no .* device is available"):
            module.synchronize()
    import trainrun.xpu  # noqa: F401


def test_type_aliases():
    from trainrun.types import Device, Number, _size
    from trainrun.nn.common_types import _size_2_t, _ratio_any_t

    def f(x: torch.Tensor, size: _size, k: _size_2_t, r: _ratio_any_t, d: Device) -> Number:
        return 1
    assert f.__annotations__["return"] is Number
    assert int in Number.__args__ and torch.device in Device.__args__
    assert int in _size_2_t.__args__


def test_constants_and_backends():
    from trainrun.distributed.constants import default_pg_timeout
    assert default_pg_timeout == timedelta(minutes=30) and torch.distributed.default_pg_timeout is default_pg_timeout
    assert torch.backends.cpu.get_cpu_capability() == "AVX2"
    assert torch.backends.opt_einsum.is_available() is False


def test_collate_with_a_users_map():
    from trainrun.utils.data._utils.collate import collate, default_collate_fn_map

    class Tokens:
        def __init__(self, ids):
            self.ids = ids

    def collate_tokens(batch, *, collate_fn_map=None):
        return torch.tensor([t.ids for t in batch])
    batch = [{"tok": Tokens([1, 2]), "y": 1.5}, {"tok": Tokens([3, 4]), "y": 2.5}]
    out = collate(batch, collate_fn_map={Tokens: collate_tokens, **default_collate_fn_map})
    assert out["tok"].tolist() == [[1, 2], [3, 4]] and out["y"].dtype == torch.float64
    with pytest.raises(TypeError, match="found .*Tokens"):
        torch.utils.data.default_collate(batch)
    # mappings keep their type (a defaultdict its factory); bools stay bool; numpy scalars become tensors
    dd = torch.utils.data.default_collate([collections.defaultdict(list, a=1), collections.defaultdict(list, a=2)])
    assert isinstance(dd, collections.defaultdict) and dd.default_factory is list and dd["a"].tolist() == [1, 2]
    assert torch.utils.data.default_collate([True, False]).dtype == torch.bool
    assert torch.utils.data.default_collate([np.float32(1), np.float32(2)]).dtype == torch.float32


def test_collate_matches_pytorch_1_13():
    pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")
    from torch.utils.data._utils.collate import default_collate as theirs
    samples = [{"x": np.ones(2, np.float32), "n": 3, "s": "a", "t": (1.0, [2, True])},
               {"x": np.zeros(2, np.float32), "n": 4, "s": "b", "t": (2.0, [3, False])}]
    ours, ref = torch.utils.data.default_collate(samples), theirs(samples)
    assert ours["x"].tolist() == ref["x"].tolist() and ours["s"] == ref["s"]
    assert ours["t"][1][0].tolist() == ref["t"][1][0].tolist() and ours["t"][1][1].tolist() == ref["t"][1][1].tolist()
    assert type(ours["t"]) is type(ref["t"]) is list


def test_legacy_autograd_profiler():
    from trainrun.autograd.profiler import profile, record_function
    x = torch.randn(8, 8)
    with profile(True) as prof:
        with record_function("my_block"):
            (x @ x).sum()
    names = {e.key for e in prof.key_averages()}
    assert "my_block" in names and any("mm" in n for n in names)
    with profile(enabled=False) as off:
        (x @ x).sum()
    assert len(off.key_averages()) == 0


def test_pipelining_schedules_module_names():
    from trainrun.distributed.pipelining.schedules import (BACKWARD_INPUT, FORWARD, ScheduleInterleavedZeroBubble,
                                                           ScheduleZBVZeroBubble, _Action)
    assert ScheduleInterleavedZeroBubble is torch.distributed.pipelining.ScheduleInterleavedZeroBubble
    assert ScheduleZBVZeroBubble is torch.distributed.pipelining.ScheduleZBVZeroBubble
    assert repr(_Action(2, FORWARD, 0)) == "2F0" and _Action(1, BACKWARD_INPUT, 3) == _Action.from_str("1I3")


def test_nn_module_files_hold_every_layer_of_their_kind():
    from trainrun.nn.modules.container import Container
    from trainrun.nn.modules.loss import NLLLoss2d, _WeightedLoss
    from trainrun.nn.modules.padding import CircularPad3d, ReflectionPad3d, ZeroPad1d
    from trainrun.nn.modules.pooling import AdaptiveMaxPool1d
    from trainrun.nn.modules.rnn import RNNCellBase
    assert CircularPad3d is torch.nn.CircularPad3d and ZeroPad1d is torch.nn.ZeroPad1d
    assert ReflectionPad3d is torch.nn.ReflectionPad3d and AdaptiveMaxPool1d is torch.nn.AdaptiveMaxPool1d
    assert RNNCellBase is torch.nn.RNNCellBase and Container is torch.nn.Container
    assert NLLLoss2d is torch.nn.NLLLoss2d and isinstance(NLLLoss2d(), _WeightedLoss)


def test_causal_bias_masks_for_sdpa():
    from trainrun.nn.attention.bias import CausalVariant, causal_lower_right, causal_upper_left
    F = torch.nn.functional
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    lower = causal_lower_right(3, 5)
    assert lower.variant == CausalVariant.LOWER_RIGHT and lower.shape == (3, 5)
    assert lower._materialize().tolist() == [[True, True, True, False, False], [True, True, True, True, False],
                                             [True, True, True, True, True]]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=lower)
    scores = (q @ k.transpose(-2, -1)) / 2.0
    ref = scores.masked_fill(~lower._materialize(), float("-inf")).softmax(-1) @ v
    assert torch.allclose(out, ref, atol=1e-6)
    square = torch.randn(1, 2, 4, 4)
    assert torch.allclose(F.scaled_dot_product_attention(square, square, square, attn_mask=causal_upper_left(4, 4)),
                          F.scaled_dot_product_attention(square, square, square, is_causal=True), atol=1e-6)
    with pytest.raises(ValueError, match="seq_len_q, seq_len_kv"):
        causal_upper_left(3)


def test_checkpoint_module_helpers():
    from trainrun.utils.checkpoint import (checkpoint, detach_variable, get_device_states, noop_context_fn,
                                           set_checkpoint_debug_enabled)
    x = torch.ones(2, requires_grad=True)
    detached = detach_variable((x, 3))
    assert detached[0] is not x and detached[0].requires_grad and detached[0].grad_fn is None and detached[1] == 3
    with pytest.raises(RuntimeError, match="Only tuple of tensors"):
        detach_variable([x])
    assert get_device_states(x) == ([], [])  # (no CUDA tensor: no device state to keep)
    with set_checkpoint_debug_enabled(True):
        y = checkpoint(lambda t: t * 3, x, use_reentrant=False, context_fn=noop_context_fn)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_fx_shape_prop_records_each_nodes_output():
    from trainrun.fx.passes.shape_prop import ShapeProp, TensorMetadata

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)

        def forward(self, x):
            h = self.l1(x).clamp(min=0)
            return self.l2(h), h.sum(1)
    gm = torch.fx.symbolic_trace(M())
    x = torch.randn(5, 4)
    out = ShapeProp(gm).propagate(x)
    assert torch.allclose(out[0], gm(x)[0])
    meta = {n.name: n.meta.get("tensor_meta") for n in gm.graph.nodes}
    assert meta["l1"].shape == (5, 8) and meta["l1"].dtype == torch.float32 and meta["l1"].stride == (8, 1)
    assert meta["x"].requires_grad is False and meta["l2"].requires_grad is True
    assert isinstance(meta["output"], tuple) and meta["output"][1].shape == (5,)
    assert all(isinstance(m, TensorMetadata) for k, m in meta.items() if k != "output")


def test_nn_grad_convolution_gradients_match_pytorch():
    ref = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")
    import numpy as np
    from trainrun.nn import grad as ours
    rng = np.random.RandomState(0)
    for dims, kw in ((1, dict(stride=2, padding=1)), (2, dict(stride=1, padding=1, dilation=2)),
                     (2, dict(groups=2)), (3, dict(stride=1))):
        x = rng.randn(2, 4, *([7] * dims)).astype(np.float32)
        w = rng.randn(6, 4 // kw.get("groups", 1), *([3] * dims)).astype(np.float32)
        conv = getattr(ref.nn.functional, f"conv{dims}d")
        out = conv(ref.tensor(x), ref.tensor(w), **kw)
        g = rng.randn(*out.shape).astype(np.float32)
        theirs_in = getattr(ref.nn.grad, f"conv{dims}d_input")(x.shape, ref.tensor(w), ref.tensor(g), **kw)
        theirs_w = getattr(ref.nn.grad, f"conv{dims}d_weight")(ref.tensor(x), w.shape, ref.tensor(g), **kw)
        got_in = getattr(ours, f"conv{dims}d_input")(x.shape, torch.tensor(w), torch.tensor(g), **kw)
        got_w = getattr(ours, f"conv{dims}d_weight")(torch.tensor(x), w.shape, torch.tensor(g), **kw)
        assert np.allclose(np.array(got_in.tolist()), theirs_in.numpy(), atol=1e-4)
        assert np.allclose(np.array(got_w.tolist()), theirs_w.numpy(), atol=1e-4)
    with pytest.raises(ValueError, match="grad_output has shape"):
        ours.conv2d_input((1, 1, 5, 5), torch.ones(1, 1, 3, 3), torch.ones(1, 1, 4, 4))


def test_cuda_surface_without_and_with_statistics(monkeypatch):
    cuda = torch.cuda
    assert cuda.has_half is True and cuda.has_magma is False
    with cuda.device_of(torch.ones(2)):  # (a CPU tensor: nothing to switch)
        pass
    if not cuda.is_available():
        assert cuda.is_bf16_supported() is False
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            cuda.init()
    stats = {"allocated_bytes.all.current": 3 << 20, "allocated_bytes.all.peak": 5 << 20,
             "requested_bytes.all.current": 3 << 20, "reserved_bytes.all.current": 8 << 20,
             "reserved_bytes.all.peak": 8 << 20, "active.all.current": 4, "inactive_split.all.current": 1,
             "segment.all.current": 2, "num_device_alloc": 2, "num_device_free": 0, "num_alloc_retries": 0,
             "num_ooms": 0}
    monkeypatch.setattr(cuda, "memory_stats", lambda device=None: stats)
    monkeypatch.setattr(cuda, "memory_reserved", lambda device=None: 8 << 20)
    nested = cuda.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["peak"] == 5 << 20 and nested["num_ooms"] == 0
    summary = cuda.memory_summary(0)
    assert "device ID 0" in summary and "3.00 MiB" in summary and "5.00 MiB" in summary and "8.00 MiB" in summary
    assert all(len(line) == 77 for line in summary.splitlines())
    with pytest.warns(FutureWarning, match="renamed to `torch.cuda.memory_reserved`"):
        cuda.memory_cached()


def test_generic_stream_and_event():
    s = torch.Stream("cpu")
    assert repr(s) == "torch.Stream device_type=cpu, device_index=-1, stream_id=0"  # (PyTorch 2.6's)
    assert s.query() and s.device == torch.device("cpu") and s.device_index == -1 and s.device_type == 0
    s.synchronize()
    e = torch.Event("cpu")
    assert e.query() and repr(e).startswith("torch.Event device_type=cpu")
    e.record(s)
    e.wait(s)
    s.wait_event(e)
    s.wait_stream(torch.Stream("cpu"))
    with pytest.raises(RuntimeError, match="cpu backend doesn't support events"):
        s.record_event()
    if not torch.cuda.is_available():
        assert torch.Stream().device == torch.device("cpu")  # (no accelerator: the CPU's)


def test_distributed_submodules_are_attributes_after_import():
    """As in PyTorch, a script may reach them without importing them (each is imported when first read), in a
    fresh interpreter."""
    import subprocess
    import sys
    code = ("import trainrun as torch\n"
            "assert torch.distributed.tensor.DTensor is not None\n"
            "assert torch.distributed.tensor.parallel.loss_parallel is not None\n"
            "assert torch.distributed.fsdp.fully_shard is not None\n"
            "assert torch.distributed.checkpoint.state_dict.get_state_dict is not None\n"
            "assert torch.distributed.algorithms._checkpoint.checkpoint_wrapper.checkpoint_wrapper is not None\n"
            "assert torch.distributed._composable.replicate is not None\n"
            "assert not hasattr(torch.distributed, 'no_such_module')\n")
    env = dict(__import__("os").environ, PYTHONPATH=str(built_tree.ROOT / "python"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
