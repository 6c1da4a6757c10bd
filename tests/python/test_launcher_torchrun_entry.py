"""torchrun's other entries and flags: `python -m trainrun.distributed.run ARGS` is the launcher (as
`python -m torch.distributed.run` is torchrun), `python -m trainrun.distributed.launch` is PyTorch's deprecated
launcher (--local-rank=N for each worker unless --use-env), and --start-method (spawn, fork, forkserver) is
accepted."""
import os
import subprocess
import sys

from built_tree import ROOT

TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
WORKER = 'import os; print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], flush=True)\n'


def _run(args, tmp_path, via_python=False):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), OMP_NUM_THREADS="1")
    head = [sys.executable, "-m", "trainrun.distributed.run"] if via_python else [str(TRAINRUN)]
    return subprocess.run(head + args + [str(script)], capture_output=True, text=True, timeout=120, env=env)


def test_python_m_trainrun_distributed_run_is_the_launcher(tmp_path):
    out = _run(["--nproc_per_node", "2", "--start_method", "fork"], tmp_path, via_python=True)
    assert out.returncode == 0, out.stderr
    assert "rank 0 of 2" in out.stdout and "rank 1 of 2" in out.stdout


def test_start_method_takes_torchruns_values_only(tmp_path):
    assert _run(["--nproc-per-node=1", "--start-method=forkserver"], tmp_path).returncode == 0
    out = _run(["--nproc-per-node=1", "--start-method=thread"], tmp_path)
    assert out.returncode != 0 and "--start-method: thread not in {spawn,fork,forkserver}" in out.stderr


LEGACY = """import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--local-rank", "--local_rank", type=int)
parser.add_argument("--epochs", type=int)
args = parser.parse_args()
print("local_rank", args.local_rank, "env", os.environ["LOCAL_RANK"], "epochs", args.epochs, flush=True)
"""


def test_python_m_trainrun_distributed_launch_passes_local_rank(tmp_path):
    script = tmp_path / "legacy.py"
    script.write_text(LEGACY)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), OMP_NUM_THREADS="1")

    def launch(*args):
        return subprocess.run([sys.executable, "-m", "trainrun.distributed.launch", *args], capture_output=True,
                              text=True, timeout=120, env=env)
    out = launch("--nproc_per_node=2", str(script), "--epochs", "3")
    assert out.returncode == 0, out.stderr
    assert "local_rank 0 env 0 epochs 3" in out.stdout and "local_rank 1 env 1 epochs 3" in out.stdout
    assert "torch.distributed.launch is deprecated" in out.stderr  # (PyTorch's FutureWarning)
    out = launch("--nproc_per_node=2", "--use_env", str(script), "--epochs", "1")
    assert out.returncode == 0 and "local_rank None env 1 epochs 1" in out.stdout, out.stderr
    out = launch("--nproc_per_node=1", "--no-python", "echo")
    assert out.returncode != 0 and "you must also set the '--use-env' flag" in out.stderr
