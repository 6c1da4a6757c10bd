"""torch.distributed.launcher.api from trainrun: elastic_launch(LaunchConfig(...), entrypoint)(*args) runs the
entrypoint on every rank through the trainrun launcher and returns {rank: its return value}; workers form a
process group; a failing rank raises ChildFailedError naming that rank, its message and traceback; a program
entrypoint; a function defined in the calling script; and the configuration errors."""
import subprocess
import sys
import textwrap

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import launcher_api_worker as worker  # noqa: E402
from trainrun.distributed.elastic.multiprocessing.errors import ChildFailedError  # noqa: E402
from trainrun.distributed.launcher.api import LaunchConfig, elastic_launch  # noqa: E402


def config(n=2):
    return LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=n, max_restarts=0, rdzv_backend="c10d",
                        run_id="launcher-api-test")


def test_returns_each_ranks_value():
    assert elastic_launch(config(), worker.rank_plus)(5) == {0: 5, 1: 6}


def test_workers_form_a_process_group():
    assert elastic_launch(config(3), worker.all_reduce_ranks)() == {r: (3, 6.0) for r in range(3)}


def test_failure_names_the_rank_and_its_error():
    with pytest.raises(ChildFailedError) as info:
        elastic_launch(config(), worker.fail_on_rank_1)()
    error = info.value
    assert set(error.failures) == {1}
    rank, failure = error.get_first_failure()
    assert rank == 1 and failure.exitcode == 1 and "ValueError: rank 1 fails on purpose" in failure.message
    assert "fail_on_rank_1" in failure.error_file_data["traceback"]
    assert "fail_on_rank_1 FAILED" in str(error) and "rank 1 fails on purpose" in str(error)


def test_program_entrypoint(tmp_path):
    script = tmp_path / "write_rank.py"
    script.write_text("import os, sys\nopen(os.path.join(sys.argv[1], 'r' + os.environ['RANK']), 'w').write('x')\n")
    assert elastic_launch(config(), sys.executable)(str(script), str(tmp_path)) == {0: None, 1: None}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("r")) == ["r0", "r1"]
    with pytest.raises(ChildFailedError) as info:
        elastic_launch(config(), "/bin/false")()
    assert {f.exitcode for f in info.value.failures.values()} == {1}


def test_function_from_the_calling_script(tmp_path):
    script = tmp_path / "launch_main.py"
    script.write_text(textwrap.dedent("""
        import os
        from trainrun.distributed.launcher.api import LaunchConfig, elastic_launch

        def greet(word):
            return f"{word}-{os.environ['RANK']}"

        if __name__ == "__main__":
            config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2, max_restarts=0)
            print("RESULT", elastic_launch(config, greet)("hi"))
    """))
    import os
    import trainrun
    package_root = os.path.dirname(os.path.dirname(trainrun.__file__))  # (the script imports this trainrun)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert "RESULT {0: 'hi-0', 1: 'hi-1'}" in out.stdout, out.stdout + out.stderr


def test_configuration_errors():
    with pytest.raises(ValueError, match="min_nodes <= max_nodes"):
        LaunchConfig(min_nodes=2, max_nodes=1, nproc_per_node=1)
    with pytest.raises(ValueError, match="'etcd' is not available"):
        elastic_launch(LaunchConfig(min_nodes=1, max_nodes=2, nproc_per_node=1, rdzv_endpoint="localhost:1"),
                       worker.rank_plus)(0)
    with pytest.raises(TypeError, match="callable or a program path"):
        elastic_launch(config(), 42)()
    assert LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=1).rdzv_configs == {"timeout": 900}
