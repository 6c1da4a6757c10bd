"""The flows PyTorch users run on one GPU (cuda_flows_worker.py: DDP, fully_shard with and without bf16 mixed
precision, autocast with GradScaler, DTensor, a distributed checkpoint, attention and a transformer layer's
gradients, a compiled DDP model), one rank through the launcher over NCCL, each against the same computation on
the CPU. The cuda case needs a GPU (scripts/gpu_check.sh runs it); the cpu case runs the same code over Gloo
everywhere."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
LAUNCHER = ROOT / "bazel-bin" / "launcher" / "trainrun"
if not LAUNCHER.exists() or not (ROOT / "bazel-bin" / "python" / "trainrun" / "_C.so").exists():
    pytest.skip("trainrun is not built (bazel build //launcher:trainrun //python:trainrun/_C.so)",
                allow_module_level=True)

import trainrun  # noqa: E402
from cuda_flows_worker import FLOWS  # noqa: E402


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_user_flows_on_one_device_match_the_cpu(device, tmp_path):
    if device == "cuda" and not trainrun.cuda.is_available():
        pytest.skip(f"needs a GPU: {trainrun.cuda.unavailable_reason()}")
    env = dict(os.environ, TRAINRUN_PYTHON=sys.executable, TRAINRUN_KERNEL_CACHE=str(tmp_path / "kernels"))
    r = subprocess.run([str(LAUNCHER), "--nproc-per-node", "1", str(ROOT / "tests" / "python" / "cuda_flows_worker.py"),
                        "--device", device], capture_output=True, text=True, timeout=300, env=env)
    lines = [line.split(":", 1)[1] for line in r.stdout.splitlines() if line.startswith("[rank0]:")]
    assert r.returncode == 0, "\n".join(lines) + r.stderr[-3000:]
    assert [line for line in lines if line.startswith("OK ")] == [f"OK {f.__name__[5:]}" for f in FLOWS], lines
