"""Numerical oracle: trainrun's tensor ops against PyTorch 1.13 (the peer) on
the same inputs. tests/tensor/oracle_dump writes inputs and trainrun's
results to a safetensors file; this test recomputes each case with torch.
Skips with a reason when torch or the built dump binary is missing."""
import pathlib
import subprocess

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")
from safetensors_io import read_safetensors  # noqa: E402  (needs torch)

ROOT = pathlib.Path(__file__).resolve().parents[2]
DUMP = ROOT / "bazel-bin" / "tests" / "tensor" / "oracle_dump"


def reference(case, x, y=None, z=None):
    F = torch.nn.functional
    op = case.rsplit("_", 1)[0] if case.split("_")[-1] in ("float32", "float64", "float16", "bfloat16") else case
    # Half/bfloat16 math in PyTorch 1.13's CPU kernels is partly missing:
    # compute those in float32 and round once, which is what we do.
    low = x.dtype in (torch.float16, torch.bfloat16)
    f = (lambda t: t.float()) if low else (lambda t: t)
    x32, y32, z32 = f(x), (f(y) if y is not None else None), (f(z) if z is not None else None)
    table = {
        "add": lambda: torch.add(x32, y32, alpha=0.5),
        "mul_nc": lambda: x32 * y32,
        "div": lambda: x32 / y32,
        "exp": lambda: torch.exp(x32), "log": lambda: torch.log(x32), "tanh": lambda: torch.tanh(x32),
        "sigmoid": lambda: torch.sigmoid(x32), "gelu": lambda: F.gelu(x32),
        "gelu_tanh": lambda: F.gelu(x32, approximate="tanh"), "silu": lambda: F.silu(x32),
        "erf": lambda: torch.erf(x32), "softmax": lambda: torch.softmax(x32, 1),
        "log_softmax0": lambda: torch.log_softmax(x32, 0), "sum1": lambda: x32.sum(1),
        "mean0": lambda: x32.mean(0), "var1": lambda: x32.var(1), "norm": lambda: torch.linalg.vector_norm(x32),
        "logsumexp1": lambda: torch.logsumexp(x32, 1), "mm": lambda: x32 @ y32,
        "cumsum1": lambda: torch.cumsum(x32, 1),
        "layer_norm": lambda: F.layer_norm(x32, (33,), y32, z32, 1e-5),
        "remainder": lambda: torch.remainder(x32, y32),
        "conv2d_g2_s2_p1": lambda: F.conv2d(x, y, z, stride=2, padding=1, groups=2),
        "max_pool2d": lambda: F.max_pool2d(x, 3, 2, 1),
        "avg_pool2d": lambda: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        "cross_entropy": lambda: F.cross_entropy(x, y),
        "cross_entropy_smooth": lambda: F.cross_entropy(x, y, label_smoothing=0.1),
        "cross_entropy_smooth_weighted": lambda: F.cross_entropy(x, y, weight=z, label_smoothing=0.2),
        "cross_entropy_smooth_sum": lambda: F.cross_entropy(x, y, reduction="sum", label_smoothing=0.3),
        "int_floor_div": lambda: torch.div(x, y, rounding_mode="floor"),
        "int_remainder": lambda: torch.remainder(x, y), "int_sum": lambda: x.sum(0),
        "int_promote_half": lambda: x + y,
        "sort_values": lambda: torch.sort(x, 1).values, "topk_values": lambda: torch.topk(x, 2, 1).values,
    }
    return table[op]().to(x.dtype if op not in ("int_promote_half",) else torch.float16)


TOLERANCE = {torch.float32: 2e-5, torch.float64: 1e-10, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def load_dump():
    """Runs the dump binary once, at collection, so each case is its own test."""
    if not DUMP.exists():
        return None
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "cases.safetensors"
        subprocess.run([str(DUMP), str(path)], check=True, capture_output=True, timeout=300)
        return read_safetensors(path)


DUMPED = load_dump()
CASES = sorted({k.rsplit(".", 1)[0] for k in DUMPED}) if DUMPED else []


def test_dump_has_every_case():
    if DUMPED is None:
        pytest.skip(f"{DUMP} is not built (run `bazel build //tests/tensor:oracle_dump`)")
    assert len(CASES) > 80, CASES


@pytest.mark.parametrize("case", CASES)
def test_case_matches_pytorch(case):
    args = [DUMPED.get(f"{case}.{n}") for n in ("x", "y", "z")]
    ours = DUMPED[f"{case}.out"]
    theirs = reference(case, *[a for a in args if a is not None])
    assert (tuple(ours.shape), ours.dtype) == (tuple(theirs.shape), theirs.dtype)
    if ours.is_floating_point():
        tol = TOLERANCE[ours.dtype]
        err = (ours.double() - theirs.double()).abs().max().item() if ours.numel() else 0.0
        assert torch.allclose(ours.double(), theirs.double(), rtol=tol, atol=tol * 10), f"max abs error {err:.3g}"
    else:
        assert torch.equal(ours, theirs)
