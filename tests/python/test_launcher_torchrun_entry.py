"""torchrun's other entry and flags: `python -m trainrun.distributed.run ARGS` is the launcher (as
`python -m torch.distributed.run` is torchrun), and --start-method (spawn, fork, forkserver) is accepted."""
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
