"""The main job, examples/train_lm.py, in miniature: the loss falls and the
last line has its documented format; FSDP on 2 ranks, DDP and one process
follow the same loss curve, and so do FSDP x TP (--tp 2) and pipeline stages (--pp 2, also sharded by FSDP on 4
ranks), whose checkpoints resume in other layouts; a job killed with SIGKILL after a checkpoint,
resumed on another number of ranks, continues that curve exactly."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from built_tree import ROOT  # trainrun from the source tree; skips when not built
from multirank import TRAINRUN

TINY = ["--dim", "32", "--layers", "1", "--heads", "2", "--ctx", "32", "--batch", "8", "--steps", "30",
        "--lr", "1e-2", "--warmup", "5", "--log-every", "10", "--ckpt-every", "10", "--eval-windows", "16",
        "--max-train-bytes", "200000", "--sample-bytes", "8"]
LAST_LINE = re.compile(r"^held-out loss (\d+\.\d+) perplexity (\d+\.\d+) \(unigram baseline (\d+\.\d+)\) after "
                       r"(\d+) steps on (\d+) ranks in (\d+\.\d) s$")
pytestmark = pytest.mark.skipif(not TRAINRUN.exists(), reason="the trainrun launcher is not built")


def command(nproc, run_dir, *extra):
    script = [str(ROOT / "examples" / "train_lm.py"), *TINY, "--run-dir", str(run_dir), *extra]
    if nproc == 1:
        return ["/usr/bin/python3", *script]
    return [str(TRAINRUN), "--nproc-per-node", str(nproc), *script]


def env():
    return dict(os.environ, OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))


def train(nproc, run_dir, *extra):
    done = subprocess.run(command(nproc, run_dir, *extra), capture_output=True, text=True, timeout=240, env=env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line.split("]:", 1)[-1] for line in done.stdout.splitlines()]
    return lines, losses(lines)


def losses(lines):
    return {int(m.group(1)): float(m.group(2)) for m in (re.match(r"step\s+(\d+)/\d+\s+loss (\S+)", l) for l in lines)
            if m}


def test_fsdp_ddp_and_one_process_follow_one_loss_curve(tmp_path):
    lines, fsdp = train(2, tmp_path / "fsdp")
    assert sorted(fsdp) == [10, 20, 30] and fsdp[30] < fsdp[10] - 0.5, fsdp
    match = LAST_LINE.match(lines[-1])
    assert match, lines[-1]
    held_out, perplexity, baseline, steps, ranks = (float(g) for g in match.groups()[:5])
    assert steps == 30 and ranks == 2 and perplexity == pytest.approx(2.718281828 ** held_out, rel=1e-3)
    assert 1.0 < perplexity < 256 and 1.0 < baseline < 256  # (beating the baseline takes the full run: main.sh)
    assert (tmp_path / "fsdp" / "loss.png").stat().st_size > 1000
    assert sorted(p.name for p in (tmp_path / "fsdp" / "ckpt").iterdir()) == ["step_10", "step_20", "step_30"]
    _, ddp = train(2, tmp_path / "ddp", "--ddp")
    _, single = train(1, tmp_path / "single")
    for step in (10, 20, 30):  # the same weights, data and updates: only float summation order differs
        assert ddp[step] == pytest.approx(fsdp[step], abs=2e-3) and single[step] == pytest.approx(fsdp[step], abs=2e-3)


def test_fsdp_x_tp_follows_the_curve_and_its_checkpoint_resumes_in_one_process(tmp_path):
    """--tp 2 on 4 ranks: a (dp=2, tp=2) mesh with the same global batch follows FSDP's curve; its checkpoint
    (2-D sharded model and optimizer state) resumes in one process along the same curve."""
    _, fsdp = train(2, tmp_path / "fsdp")
    lines, tp = train(4, tmp_path / "tp", "--tp", "2")
    assert any("FSDP2 x TP (dp=2, tp=2)" in line for line in lines), lines[:3]
    for step in (10, 20, 30):
        assert tp[step] == pytest.approx(fsdp[step], abs=2e-3), (tp, fsdp)
    shutil.rmtree(tmp_path / "tp" / "ckpt" / "step_30")
    lines, resumed = train(1, tmp_path / "tp", "--resume")
    assert any(re.search(r"resumed from .*step_20 at step 20", line) for line in lines), lines[:3]
    assert resumed[30] == pytest.approx(tp[30], abs=2e-3), (resumed, tp)


def test_a_live_progress_bar_on_a_terminal_and_none_in_a_pipe(tmp_path):
    """Under a terminal the launcher draws rank 0's bar (lines ended by a lone carriage return) over the
    current line and erases it before the next line; through a pipe no bar appears."""
    import pty
    leader, follower = pty.openpty()
    job = subprocess.Popen(command(2, tmp_path / "tty", "--steps", "12", "--log-every", "6"), stdout=follower,
                           stderr=follower, env=env(), start_new_session=True)
    os.close(follower)
    import select
    seen = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if not select.select([leader], [], [], 1.0)[0]:  # never a read that can block past the deadline
                if job.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the job closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
    os.close(leader)
    text = seen.decode(errors="replace")
    assert job.returncode == 0, text[-2000:]
    assert "\x1b[K[rank0]:[" in text and "/12  loss" in text, text[-2000:]
    assert "\x1b[K[rank0]:step     6/12" in text, text[-2000:]  # the bar erased before the next line
    lines, _ = train(2, tmp_path / "pipe", "--steps", "12", "--log-every", "6")
    assert not any("ETA" in line and "[" in line.split("loss")[0] for line in lines), lines


def test_pipeline_stages_follow_the_curve_and_checkpoints_move_between_layouts(tmp_path):
    """--pp 2 (1F1B, 4 microbatches; the tied embedding's two copies kept equal) follows FSDP's curve, and so
    do Interleaved1F1B (4 stages looped over the 2 ranks) and zero-bubble ZB-V ("zb": 4 stages in a V, the tied
    embedding one tensor on rank 0); the pipeline's checkpoint (each rank's own layers) resumes in one
    process, and FSDP's resumes as a GPipe pipeline."""
    four = ("--layers", "4")
    _, fsdp = train(2, tmp_path / "fsdp", *four)
    lines, pp = train(2, tmp_path / "pp", *four, "--pp", "2")
    assert any("pipeline (2 stages on 2 ranks, 1F1B, 4 microbatches)" in line for line in lines), lines[:3]
    lines, interleaved = train(2, tmp_path / "interleaved", *four, "--pp", "2", "--schedule", "Interleaved1F1B")
    assert any("pipeline (4 stages on 2 ranks, Interleaved1F1B" in line for line in lines), lines[:3]
    lines, zb = train(2, tmp_path / "zb", *four, "--pp", "2", "--schedule", "zb")
    assert any("pipeline (4 stages on 2 ranks, zb" in line for line in lines), lines[:3]
    for step in (10, 20, 30):
        assert pp[step] == pytest.approx(fsdp[step], abs=2e-3), (pp, fsdp)
        assert interleaved[step] == pytest.approx(fsdp[step], abs=2e-3), (interleaved, fsdp)
        assert zb[step] == pytest.approx(fsdp[step], abs=2e-3), (zb, fsdp)
    assert LAST_LINE.match(lines[-1]), lines[-1]
    shutil.rmtree(tmp_path / "pp" / "ckpt" / "step_30")
    _, resumed = train(1, tmp_path / "pp", *four, "--resume")
    assert resumed[30] == pytest.approx(pp[30], abs=2e-3), (resumed, pp)
    shutil.rmtree(tmp_path / "fsdp" / "ckpt" / "step_30")
    _, resumed = train(2, tmp_path / "fsdp", *four, "--resume", "--pp", "2", "--schedule", "GPipe")
    assert resumed[30] == pytest.approx(fsdp[30], abs=2e-3), (resumed, fsdp)


def test_pipeline_stages_sharded_by_fsdp_follow_the_curve_and_checkpoints_move_between_layouts(tmp_path):
    """--pp 2 on 4 ranks: two pipeline replicas, each stage sharded by fully_shard over its 2 replicas
    (PP x FSDP), follow FSDP's curve on 4 ranks with 1F1B and with Interleaved1F1B (a replica that missed
    the other's gradients would drift off it); the checkpoint resumes as FSDP on 2 ranks, FSDP's as PP x FSDP;
    ZB-V, whose rank 0 holds both ends of the tied embedding, is refused by name."""
    four = ("--layers", "4")
    _, fsdp = train(4, tmp_path / "fsdp", *four)
    lines, pp = train(4, tmp_path / "pp", *four, "--pp", "2")
    assert any("(2 stages on 2 ranks, 1F1B, 4 microbatches, FSDP2 over 2 replicas)" in line for line in lines), \
        lines[:3]
    lines, interleaved = train(4, tmp_path / "interleaved", *four, "--pp", "2", "--schedule", "Interleaved1F1B",
                               "--microbatches", "2")
    assert any("(4 stages on 2 ranks, Interleaved1F1B, 2 microbatches, FSDP2" in line for line in lines), lines[:3]
    for step in (10, 20, 30):
        assert pp[step] == pytest.approx(fsdp[step], abs=2e-3), (pp, fsdp)
        assert interleaved[step] == pytest.approx(fsdp[step], abs=2e-3), (interleaved, fsdp)
    assert LAST_LINE.match(lines[-1]), lines[-1]
    shutil.rmtree(tmp_path / "pp" / "ckpt" / "step_30")
    _, resumed = train(2, tmp_path / "pp", *four, "--resume")
    assert resumed[30] == pytest.approx(pp[30], abs=2e-3), (resumed, pp)
    shutil.rmtree(tmp_path / "fsdp" / "ckpt" / "step_30")
    _, resumed = train(4, tmp_path / "fsdp", *four, "--resume", "--pp", "2", "--schedule", "GPipe")
    assert resumed[30] == pytest.approx(fsdp[30], abs=2e-3), (resumed, fsdp)
    refused = subprocess.run(command(4, tmp_path / "zb", *four, "--pp", "2", "--schedule", "zb"), capture_output=True,
                             text=True, timeout=120, env=env())
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "puts the first and the last stage on one rank" in output, output[-2000:]


def test_a_killed_job_resumes_on_another_rank_count_along_the_same_curve(tmp_path):
    _, uninterrupted = train(2, tmp_path / "whole")
    run_dir = tmp_path / "killed"
    job = subprocess.Popen(command(2, run_dir, "--sample-bytes", "0"), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "ckpt" / "step_10" / ".committed").exists():
            assert job.poll() is None and time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.005)
        os.killpg(job.pid, signal.SIGKILL)  # the launcher and its workers, mid-run
    finally:
        job.wait(30)
    lines, resumed = train(1, run_dir, "--resume")
    start = int(re.search(r"resumed from .*step_(\d+) at step (\d+)", "\n".join(lines)).group(2))
    assert start in (10, 20, 30)
    for step in (s for s in (20, 30) if s > start):
        assert resumed[step] == pytest.approx(uninterrupted[step], abs=2e-3), (start, resumed, uninterrupted)
    assert LAST_LINE.match(lines[-1]) and " on 1 ranks " in lines[-1]


def test_resume_skips_a_save_cut_short(tmp_path):
    """A node lost mid-save leaves step_N.partial (found by the emulated cluster's elastic scenario):
    --resume takes the newest committed step_N and never trips over the partial folder."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("train_lm", ROOT / "examples" / "train_lm.py")
    train_lm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_lm)
    ckpt = tmp_path / "ckpt"
    for name, committed in (("step_3", True), ("step_20", True), ("step_100", False), ("step_5.partial", False),
                            ("step_200.partial", True)):
        (ckpt / name).mkdir(parents=True)
        if committed:
            (ckpt / name / ".committed").touch()
    assert train_lm.latest_checkpoint(tmp_path) == ckpt / "step_20"
    assert train_lm.latest_checkpoint(tmp_path / "none") is None
