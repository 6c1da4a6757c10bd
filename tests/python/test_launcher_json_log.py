"""--log-format json: every line the launcher writes, its own and its
workers', is one JSON object with the fields log collectors key on."""
import json
import subprocess

from built_tree import ROOT

TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
# Rank 1 fails, but only after rank 0 has printed (else the agent's SIGTERM could cut rank 0 short).
WORKER = """
import os, pathlib, sys, time
print("step 1 of rank", os.environ["RANK"], flush=True)
print("caf\\u00e9 on stderr", file=sys.stderr, flush=True)
printed = pathlib.Path(sys.argv[1]) / "rank0.printed"
if os.environ["RANK"] == "0":
    printed.touch()
    sys.exit(0)
deadline = time.monotonic() + 60
while not printed.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
sys.exit(3)
"""


def test_every_line_is_a_json_object_with_the_jobs_fields(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    r = subprocess.run([str(TRAINRUN), "--log-format", "json", "--nproc", "2", "--rdzv-id", "json-job",
                        str(tmp_path / "worker.py"), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3
    lines = [json.loads(line) for line in (r.stdout + r.stderr).splitlines()]  # each parses, or this raises
    for line in lines:
        assert {"ts", "level", "msg", "run_id", "attempt", "host", "pid", "source"} <= line.keys(), line
        assert line["run_id"] == "json-job" and line["ts"].endswith("Z")
    workers = [line for line in lines if line["source"] == "worker"]
    assert sorted((w["rank"], w["stream"], w["msg"]) for w in workers) == [
        (0, "stderr", "caf\u00e9 on stderr"), (0, "stdout", "step 1 of rank 0"),
        (1, "stderr", "caf\u00e9 on stderr"), (1, "stdout", "step 1 of rank 1")]
    agent = [line for line in lines if line["source"] == "agent"]
    # The root-cause summary of the failure is one object (its lines joined in msg).
    summary = next(line for line in agent if "worker group failed" in line["msg"])
    assert "rank:      1 (local rank 1)" in summary["msg"] and "exit code: 3" in summary["msg"]


def test_an_unknown_format_is_refused_by_name(tmp_path):
    (tmp_path / "noop.py").write_text("")
    r = subprocess.run([str(TRAINRUN), "--log-format", "xml", str(tmp_path / "noop.py")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--log-format: 'xml' is not a format (text or json)" in r.stderr
