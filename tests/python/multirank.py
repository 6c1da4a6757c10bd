"""Runs N ranks under the trainrun launcher for the Python suites, the same
way tests/multirank does for C++: a deadline, every process the run started
killed at the end (its own session), and the output split per rank.

    def test_sums(ranks):                      # the fixture (conftest.py)
        ranks.run_function(2, all_reduce_sums, 1024)   # a module-level function of the test file
        ranks.run_script(4, "tests/python/dtensor/ops_worker.py", "2x2")

A run passes when the launcher exits 0; run_function also requires each rank
to return from the function ("rank R: ok")."""
import os
import pathlib
import signal
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
ENTRY = pathlib.Path(__file__).resolve().parent / "multirank_entry.py"


class RankRun:
    """What one run printed: `stdout`/`stderr` whole, and per_rank(r): rank r's lines (prefix removed)."""

    def __init__(self, what, returncode, stdout, stderr, killed):
        self.what, self.returncode, self.stdout, self.stderr, self.killed = what, returncode, stdout, stderr, killed

    def per_rank(self, rank):
        prefix = "[rank%d]:" % rank
        lines = (self.stdout + self.stderr).splitlines()
        return "\n".join(line[len(prefix):] for line in lines if line.startswith(prefix))

    def failure_text(self):
        head = "%s: %s" % (self.what, "killed at the deadline" if self.killed else "exit status %s" % self.returncode)
        return "\n".join([head, "--- stdout (tail)", self.stdout[-6000:], "--- stderr (tail)", self.stderr[-4000:]])


class RankRunner:
    def __init__(self, deadline=240):
        self.deadline = deadline

    def run(self, nproc, program, *args, launcher_flags=(), env=None, deadline=None, check=True):
        """`trainrun --nproc-per-node nproc [launcher_flags] program args...`; returns a RankRun."""
        environment = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
        command = [str(TRAINRUN), "--nproc-per-node", str(nproc), *launcher_flags, str(program), *map(str, args)]
        what = "%s on %d ranks" % (" ".join(map(str, [pathlib.Path(program).name, *args])), nproc)
        # Its own session: one killpg reaches the launcher and every worker.
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                                start_new_session=True, cwd=ROOT)
        killed = False
        try:
            out, err = proc.communicate(timeout=deadline or self.deadline)
        except subprocess.TimeoutExpired:
            killed = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers, if any
            except ProcessLookupError:
                pass
        run = RankRun(what, proc.returncode, out, err, killed)
        if check:
            assert not killed and proc.returncode == 0, run.failure_text()
        return run

    def run_script(self, nproc, script, *args, **kwargs):
        return self.run(nproc, ROOT / script, *args, **kwargs)

    def run_function(self, nproc, fn, *args, **kwargs):
        """fn(*args) on every rank; fn is a module-level function of an importable file, args are strings."""
        module = sys.modules[fn.__module__]
        run = self.run(nproc, ENTRY, module.__file__, fn.__name__, *args, **kwargs)
        if kwargs.get("check", True):
            for r in range(nproc):
                assert "rank %d: ok" % r in run.per_rank(r), run.failure_text()
        return run
