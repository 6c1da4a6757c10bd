"""trainrun.export with dynamic_shapes (torch.export.Dim): one exported program runs at every size of its dynamic
dims in their range, from memory, from a saved archive, from an AOT package in Python and from the C++ runner,
with the eager forward's outputs; sizes out of range, inputs that disagree on a dim, and forwards that have no
one program for all sizes (branching on a size, dividing one, reading one as a float) are refused by name."""
import subprocess

import pytest

from built_tree import ROOT

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun.export import Dim  # noqa: E402

AOT_RUN = ROOT / "bazel-bin" / "compile" / "aot_run"


class Norm(nn.Module):
    """Pointwise ops and means along rows and down columns: generated loops whose means divide at run time."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(24))

    def forward(self, x):
        h = x * torch.sigmoid(x) + 1.0
        m = h.mean(-1, keepdim=True)
        v = ((h - m) ** 2).mean(-1, keepdim=True)
        y = (h - m) * torch.rsqrt(v + 1e-5) * self.weight
        return y, y.mean(0)


def _close(a, b):
    return torch.allclose(a, b, rtol=1e-5, atol=1e-5)


def _eager(model, *xs):
    with torch.no_grad():
        return model(*xs)


def test_a_transformer_block_with_dynamic_batch_and_sequence_equals_eager_at_sizes_never_recorded():
    torch.manual_seed(0)
    block = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    batch, seq = Dim("batch"), Dim("seq", max=128)
    ep = torch.export.export(block, (torch.randn(4, 10, 32),), dynamic_shapes=({0: batch, 1: seq},))
    assert ep.range_constraints == {"batch": (0, None), "seq": (0, 128)}
    assert "src: [batch, seq, 32]" in str(ep)
    for b, s in [(1, 1), (4, 10), (3, 17), (9, 128)]:
        x = torch.randn(b, s, 32)
        got = ep.module()(x)
        assert got.shape == (b, s, 32) and _close(got, _eager(block, x)), (b, s)
    with pytest.raises(ValueError, match="input 'src' has size 129 at dim 1 \\(seq\\): seq = 129 is outside its "
                                         "range \\[0, 128\\]"):
        ep.module()(torch.randn(2, 129, 32))
    with pytest.raises(ValueError, match="input 'src' has size 31 at dim 2; the program was exported for 32 there"):
        ep.module()(torch.randn(2, 5, 31))


def test_fused_loops_with_means_and_a_cnn_with_dynamic_spatial_dims_equal_eager():
    torch.manual_seed(0)
    norm = Norm()
    ep = torch.export.export(norm, (torch.randn(6, 24),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert "loops for" in str(ep) and "0 loops" not in str(ep), str(ep)
    for n in [1, 2, 6, 33, 500]:
        x = torch.randn(n, 24)
        (y, col), (y_e, col_e) = ep.module()(x), _eager(norm, x)
        assert _close(y, y_e) and _close(col, col_e), n
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(8, 2)).eval()
    h, w = torch.export.dims("h", "w", min=4, max=64)
    ep = torch.export.export(cnn, (torch.randn(2, 3, 16, 16),), dynamic_shapes=[(Dim("b", max=32), None, h, w)])
    for shape in [(1, 3, 16, 16), (5, 3, 20, 9), (32, 3, 64, 64)]:
        x = torch.randn(*shape)
        assert _close(ep.module()(x), _eager(cnn, x)), shape


class Cat(nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], 0) * 2


def test_one_dim_shared_by_inputs_and_dims_derived_from_it():
    batch = Dim("batch", min=1, max=100)
    ep = torch.export.export(Cat(), (torch.randn(6, 3), torch.randn(12, 3)),
                             dynamic_shapes={"x": {0: batch}, "y": {0: 2 * batch}})
    assert "y: [2*batch, 3]" in str(ep)
    x, y = torch.randn(3, 3), torch.randn(6, 3)
    assert torch.equal(ep.module()(x, y), Cat()(x, y))
    with pytest.raises(ValueError, match="input 'y' has size 7 at dim 0, which is not 2\\*batch for any batch"):
        ep.module()(torch.randn(3, 3), torch.randn(7, 3))
    ep = torch.export.export(Cat(), (torch.randn(6, 3), torch.randn(6, 3)),
                             dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    with pytest.raises(ValueError, match="input 'y' has size 5 at dim 0, so batch = 5; but batch = 4 from input 'x'"):
        ep.module()(torch.randn(4, 3), torch.randn(5, 3))
    with pytest.raises(ValueError, match="y.shape\\[0\\] is 12, so batch = 12; but batch = 6 at x.shape\\[0\\]"):
        torch.export.export(Cat(), (torch.randn(6, 3), torch.randn(12, 3)),
                            dynamic_shapes={"x": {0: batch}, "y": {0: batch}})


def test_a_dynamic_program_survives_save_load_and_runs_as_an_aot_package_from_python_and_cpp(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 5))
    ep = torch.export.export(model, (torch.randn(6, 12),), dynamic_shapes={"input": {0: Dim("batch", max=256)}})
    torch.export.save(ep, tmp_path / "model.pt2")
    loaded = torch.export.load(tmp_path / "model.pt2")
    x = torch.randn(37, 12)
    expected = _eager(model, x)
    assert _close(loaded.module()(x), expected)
    assert loaded.range_constraints == {"batch": (0, 256)}
    package = torch.aot_compile(ep, tmp_path / "model.aot")
    aot = torch.aot_load(package)
    assert _close(aot(x), expected)
    with pytest.raises(ValueError, match="input 'input' has size 300 at dim 0 \\(batch\\): batch = 300 is outside"):
        aot(torch.randn(300, 12))

    if not AOT_RUN.exists():
        pytest.skip(f"{AOT_RUN} is not built (bazel build //compile:aot_run)")
    for rows in (1, 37, 256):
        x = torch.randn(rows, 12)
        torch.save({"input": x}, str(tmp_path / "inputs.safetensors"))
        run = subprocess.run([str(AOT_RUN), package, str(tmp_path / "inputs.safetensors"),
                              str(tmp_path / "outputs.safetensors")], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert _close(torch.load(str(tmp_path / "outputs.safetensors"))["output0"], _eager(model, x)), rows
    torch.save({"input": torch.randn(257, 12)}, str(tmp_path / "wrong.safetensors"))
    run = subprocess.run([str(AOT_RUN), package, str(tmp_path / "wrong.safetensors"), str(tmp_path / "o.safetensors")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "batch = 257 is outside its range [0, 256]" in run.stderr


class Branch(nn.Module):
    def forward(self, x):
        return x * 2 if x.shape[0] > 4 else x + 1


class Halve(nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0] // 2, -1) * 2


class Scale(nn.Module):
    def forward(self, x):
        return x * (1.0 / x.shape[0])


def test_forwards_with_no_one_program_for_all_sizes_are_refused_naming_the_op():
    x = torch.randn(6, 3)
    with pytest.raises(ValueError, match="recorded at b=2 and at b=5 differs at op 2: `%2 = add.*` vs `%2 = mul"):
        torch.export.export(Branch(), (x,), dynamic_shapes=({0: Dim("b")},))
    with pytest.raises(ValueError, match="the forward fails at b=5, a size in the dims' ranges: reshape"):
        torch.export.export(Halve(), (x,), dynamic_shapes=({0: Dim("b")},))
    with pytest.raises(ValueError, match="fill_\\(%1, Scalar 0.5\\)` vs `%1 = fill_\\(%1, Scalar 0.33"):
        torch.export.export(Scale(), (x,), dynamic_shapes=({0: Dim("b")},))
    # the same forwards export with that dim static, and Dim.STATIC is static
    assert torch.equal(torch.export.export(Branch(), (x,), dynamic_shapes=({0: Dim.STATIC},)).module()(x), x * 2)


def test_bad_dynamic_shapes_are_refused_by_name():
    x, y = torch.randn(6, 3), torch.randn(6, 3)
    with pytest.raises(ValueError, match="dynamic_shapes names \\['z'\\], which are not inputs; the inputs are"):
        torch.export.export(Cat(), (x, y), dynamic_shapes={"x": {0: Dim("b")}, "z": None})
    with pytest.raises(ValueError, match="x.shape\\[0\\] is 6, so q = 6, outside Dim\\('q', min=2, max=3\\)"):
        torch.export.export(Cat(), (x, y), dynamic_shapes={"x": {0: Dim("q", min=2, max=3)}})
    with pytest.raises(ValueError, match="dynamic_shapes\\['x'\\] names dim 2; the input has 2 dims"):
        torch.export.export(Cat(), (x, y), dynamic_shapes={"x": {2: Dim("b")}})
    with pytest.raises(ValueError, match="dynamic_shapes has 1 entries for 2 inputs"):
        torch.export.export(Cat(), (x, y), dynamic_shapes=({0: Dim("b")},))
    ep = torch.export.export(Cat(), (x, y), dynamic_shapes={"x": (Dim.AUTO, 3), "y": (Dim.AUTO, 3)})
    assert torch.equal(ep.module()(torch.ones(4, 3), torch.ones(2, 3)), torch.full((6, 3), 2.0))
    with pytest.raises(ValueError, match="gives dim 1 the static size 4, but the example's is 3"):
        torch.export.export(Cat(), (x, y), dynamic_shapes={"x": (Dim.AUTO, 4)})
    with pytest.raises(TypeError, match="dim 0 is 'batch'; expected a Dim"):
        torch.export.export(Cat(), (x, y), dynamic_shapes={"x": {0: "batch"}})
    with pytest.raises(ValueError, match="two Dims are named 'b' with different ranges"):
        torch.export.export(Cat(), (x, y), dynamic_shapes={"x": {0: Dim("b")}, "y": {0: Dim("b", max=9)}})
    with pytest.raises(ValueError, match="x.shape\\[0\\] is 1 in the example and b is dynamic; .* an example of 2"):
        torch.export.export(Cat(), (torch.randn(1, 3), y), dynamic_shapes={"x": {0: Dim("b")}})
    with pytest.raises(ValueError, match="allows too few sizes to record the program at"):
        torch.export.export(Cat(), (torch.randn(3, 3), y), dynamic_shapes={"x": {0: Dim("n", min=2, max=3)}})


def test_a_custom_op_whose_other_arguments_follow_a_size_is_refused():
    @torch.library.custom_op("dyntest::scale", mutates_args=())
    def scale(x: torch.Tensor, k: int) -> torch.Tensor:
        return x * k

    @scale.register_fake
    def _(x, k):
        return torch.empty_like(x)

    class Fixed(nn.Module):
        def forward(self, x):
            return scale(x, 3) + 1

    class Follows(nn.Module):
        def forward(self, x):
            return scale(x, x.shape[0])

    ep = torch.export.export(Fixed(), (torch.randn(4, 2),), dynamic_shapes=({0: Dim("n")},))
    x = torch.randn(9, 2)
    assert torch.equal(ep.module()(x), x * 3 + 1)
    with pytest.raises(ValueError, match="differs at op 0: `%1 = dyntest::scale\\(k=2\\)\\(%0\\)` vs .*k=3"):
        torch.export.export(Follows(), (torch.randn(4, 2),), dynamic_shapes=({0: Dim("n")},))


class TinyLM(nn.Module):
    """Token and position embeddings (arange of the sequence length) and causal attention: the main job's shape."""

    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(50, 16), nn.Embedding(64, 16)
        self.qkv, self.head = nn.Linear(16, 48), nn.Linear(16, 50)

    def forward(self, idx):
        B, T = idx.shape
        h = self.tok(idx) + self.pos(torch.arange(T))
        q, k, v = (t.view(B, T, 2, 8).transpose(1, 2) for t in self.qkv(h).split(16, dim=-1))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.head(y.transpose(1, 2).reshape(B, T, 16))


def test_a_language_model_with_a_dynamic_sequence_length_equals_eager():
    torch.manual_seed(0)
    lm = TinyLM().eval()
    ep = torch.export.export(lm, (torch.randint(0, 50, (2, 10)),),
                             dynamic_shapes={"idx": {0: Dim("batch", max=8), 1: Dim("T", max=64)}})
    for b, t in [(1, 1), (2, 10), (3, 33), (8, 64)]:
        idx = torch.randint(0, 50, (b, t))
        assert _close(ep.module()(idx), _eager(lm, idx)), (b, t)


def test_a_tensor_from_python_data_that_follows_a_size_is_refused():
    import numpy as np

    class FromNumpy(nn.Module):
        def forward(self, x):
            return x * torch.from_numpy(np.linspace(0, 1, x.shape[0], dtype=np.float32))

    with pytest.raises(ValueError, match="reads a different tensor constant %1 \\(shape \\[2\\] vs \\[3\\]\\): a "
                                         "tensor made outside the recorded ops"):
        torch.export.export(FromNumpy(), (torch.randn(4),), dynamic_shapes=({0: Dim("n")},))


def test_auto_dims_the_forward_needs_equal_are_one_dim():
    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    x, y = torch.randn(6, 3), torch.randn(6, 3)
    for hint in (Dim.AUTO, Dim.DYNAMIC):
        ep = torch.export.export(Add(), (x, y), dynamic_shapes={"x": {0: hint}, "y": {0: hint}})
        assert list(ep.range_constraints) == ["s0"]
        a, b = torch.randn(9, 3), torch.randn(9, 3)
        assert torch.allclose(ep.module()(a, b), a + b)
        with pytest.raises(ValueError, match="input 'y' has size 4 at dim 0, so s0 = 4; but s0 = 9 from input 'x'"):
            ep.module()(a, torch.randn(4, 3))
    # (AUTO dims of equal example size that the forward does not tie stay two: the Cat of the test above)
