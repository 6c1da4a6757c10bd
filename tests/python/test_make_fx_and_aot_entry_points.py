"""torch.fx.experimental.proxy_tensor.make_fx (a function's aten program as a GraphModule: placeholders arg0_1,
..., one node per op, the function's output structure), torch._export.aot_compile / aot_load (PyTorch 2.2-2.5's
AOTInductor entry points) and torch._functorch.config, as PyTorch scripts call them."""
import os

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun.fx.experimental.proxy_tensor import make_fx  # noqa: E402


def test_make_fx_gives_the_aten_program_and_runs_it_on_new_inputs():
    def f(a, b):
        return {"total": (a.sin() * b).sum(dim=0), "parts": [a.cos()]}

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    gm = make_fx(f)(x, y)
    assert isinstance(gm, torch.fx.GraphModule)
    nodes = [(n.op, n.target) for n in gm.graph.nodes]
    assert nodes[:2] == [("placeholder", "arg0_1"), ("placeholder", "arg1_1")]
    targets = [t for op, t in nodes if op == "call_function"]
    assert targets == [torch.ops.aten.sin.default, torch.ops.aten.mul.default, torch.ops.aten.sum.default,
                       torch.ops.aten.cos.default], targets
    assert gm.code.startswith("def forward(self, arg0_1, arg1_1):\n    sin = torch.ops.aten.sin.default(arg0_1)")
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    out, want = gm(a, b), f(a, b)
    assert set(out) == {"total", "parts"} and isinstance(out["parts"], list)
    assert torch.allclose(out["total"], want["total"]) and torch.allclose(out["parts"][0], want["parts"][0])


def test_make_fx_reads_a_modules_weights_as_they_are_when_run():
    lin = nn.Linear(4, 2)
    gm = make_fx(lambda a: lin(a).relu())(torch.randn(3, 4))
    x = torch.randn(3, 4)
    with torch.no_grad():
        lin.weight.mul_(2)
    assert torch.allclose(gm(x), lin(x).relu())


def test_make_fx_refuses_what_it_cannot_record_and_bad_modes():
    def branchy(a):
        return a + 1 if a.sum() > 0 else a - 1

    with pytest.raises(RuntimeError, match="make_fx: branchy could not be recorded whole: item\\(\\)"):
        make_fx(branchy)(torch.ones(2))
    with pytest.raises(AssertionError, match="unexpected tracing mode 'lazy'"):
        make_fx(branchy, tracing_mode="lazy")
    with pytest.raises(ValueError, match="output 0 is an input itself"):
        make_fx(lambda a: a)(torch.ones(2))


def test_export_aot_compile_and_aot_load_round_trip(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3)).eval()
    x = torch.randn(2, 4)
    path = torch._export.aot_compile(model, (x,), options={"aot_inductor.output_path": str(tmp_path / "m.aot")})
    assert path == str(tmp_path / "m.aot") and os.path.exists(path)
    run = torch._export.aot_load(path, "cpu")
    other = torch.randn(2, 4)
    assert torch.allclose(run(other), model(other), atol=1e-6)
    with pytest.raises(ValueError, match="device 'cuda'"):
        torch._export.aot_load(path, "cuda")
    with pytest.raises(ValueError, match="options \\['max_autotune'\\] are not supported"):
        torch._export.aot_compile(model, (x,), options={"max_autotune": True})


def test_functorch_config_is_readable_and_patchable():
    from trainrun._functorch import config
    assert config.activation_memory_budget == 1.0
    with config.patch(activation_memory_budget=0.5):
        assert torch._functorch.config.activation_memory_budget == 0.5
    assert config.activation_memory_budget == 1.0
