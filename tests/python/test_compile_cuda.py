"""trainrun.compile on CUDA tensors: fused loops become CUDA kernels (compile/cuda_loop_codegen.h, built by
NVRTC at first use). Needs a GPU (scripts/gpu_check.sh runs this file); without one every test skips, and
tests/compile/cuda_loop_codegen_test runs the same kernels emulated on the CPU."""
import copy
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
if not (ROOT / "bazel-bin" / "python" / "trainrun" / "_C.so").exists():
    pytest.skip("trainrun._C is not built (bazel build //python:trainrun/_C.so)", allow_module_level=True)

import trainrun as torch  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason=f"needs a GPU: {torch.cuda.unavailable_reason()}")
nn = torch.nn


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINRUN_KERNEL_CACHE", str(tmp_path / "kernels"))


def _close(a, b):
    return torch.allclose(a.cpu(), b.cpu(), rtol=1e-4, atol=1e-5)


def _fused_lines(compiled):
    """The fused loops explain() lists; skips when this machine has no NVRTC (a GPU without the CUDA toolkit)."""
    if "cannot open NVRTC" in compiled.explain():
        pytest.skip("NVRTC (the CUDA toolkit's libnvrtc) is not on this machine: " + compiled.explain())
    return [line for line in compiled.explain().splitlines() if "= fused_" in line]


@pytest.mark.parametrize("name", ["mlp", "block"])
def test_compiled_training_steps_on_cuda_equal_eager_ones_with_fused_kernels(name):
    torch.manual_seed(0)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))
        shape = (6, 12)
    else:
        model = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        shape = (3, 7, 32)
    model = model.cuda()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model)
    opt_c = torch.optim.SGD(model.parameters(), lr=0.05)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.05)
    for _ in range(4):
        x = torch.randn(*shape, device="cuda")
        for m, opt in ((compiled, opt_c), (eager, opt_e)):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            if m is compiled:
                loss_c = loss
        assert _close(loss_c, loss)
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        assert _close(p, q), n
    assert compiled._compiled.replays == 3, compiled.explain()
    assert _fused_lines(compiled), compiled.explain()
    assert "not fused" not in compiled.explain(), compiled.explain()
    if name == "block":  # softmax's and layer norm's backward: row reductions (and column sums) in one kernel
        assert any("sum" in line and "mean" in line for line in _fused_lines(compiled)), compiled.explain()


def test_pointwise_chains_with_numbers_and_masks_on_cuda():
    def f(x, b):
        y = torch.where(x > 0, torch.tanh(x * b + 1), torch.exp(-x) / 3)
        return y * torch.sigmoid(x), (y - y.amax(-1, keepdim=True)).exp().sum(-1), (y * 2).mean(0)

    compiled = torch.compile(f)
    for rows in (5, 300):  # (a new shape records anew; the kernels take any size)
        x, b = torch.randn(rows, 37, device="cuda"), torch.randn(37, device="cuda")
        with torch.no_grad():
            for _ in range(2):
                got = compiled(x, b)
            want = f(x, b)
        for g, w in zip(got, want):
            assert g.device == x.device and _close(g, w)
    assert _fused_lines(compiled), compiled.explain()


class _Pointwise(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * torch.sigmoid(x) - x.exp() / 3


def test_an_aot_package_of_a_cuda_program_is_refused_by_name(tmp_path):
    x = torch.randn(3, 8, device="cuda")
    ep = torch.export.export(_Pointwise(), (x,))
    if "cannot open NVRTC" in str(ep):
        pytest.skip("NVRTC (the CUDA toolkit's libnvrtc) is not on this machine")
    assert _close(ep.module()(x), _Pointwise()(x))  # the exported program runs its CUDA loop
    with pytest.raises(ValueError, match="packages hold CPU loops only"):
        torch.aot_compile(ep, str(tmp_path / "m.aot"))
