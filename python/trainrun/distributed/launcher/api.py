"""The launcher from Python, as torch.distributed.launcher.api:

    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2, rdzv_backend="c10d")
    results = elastic_launch(config, train)(lr, epochs)    # {global rank: train(lr, epochs) on that rank}

Each call runs the trainrun launcher (the same agent as `trainrun --nproc-per-node ...`: rendezvous, restarts,
health checks) on a small worker program (_entry.py) that unpickles the entrypoint and its arguments, calls it
and writes back what it returned or how it failed. A function must be importable by the workers (module level;
one defined in the calling script is found by re-importing that script, whose launching code must sit under
`if __name__ == "__main__":`, as with multiprocessing's spawn). A string entrypoint is a program: the Python
interpreter (its first argument the script) or any executable. Failures raise ChildFailedError with each failed
rank's message and traceback."""
import dataclasses
import os
import pathlib
import pickle
import subprocess
import sys
import tempfile
import uuid

from trainrun.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]


@dataclasses.dataclass
class LaunchConfig:
    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    logs_specs: object = None
    run_id: str = ""
    role: str = "default_role"
    rdzv_endpoint: str = ""
    rdzv_backend: str = "etcd"
    rdzv_configs: dict = dataclasses.field(default_factory=dict)
    rdzv_timeout: int = -1
    max_restarts: int = 3
    monitor_interval: float = 0.1
    start_method: str = "spawn"
    log_line_prefix_template: object = None
    metrics_cfg: dict = dataclasses.field(default_factory=dict)
    local_addr: object = None

    def __post_init__(self):
        if self.rdzv_timeout != -1:
            self.rdzv_configs["timeout"] = self.rdzv_timeout
        elif "timeout" not in self.rdzv_configs:
            self.rdzv_configs["timeout"] = 900
        if not 0 < self.min_nodes <= self.max_nodes:
            raise ValueError(f"LaunchConfig: need 0 < min_nodes <= max_nodes, got {self.min_nodes} and "
                             f"{self.max_nodes}")
        if self.nproc_per_node < 1:
            raise ValueError(f"LaunchConfig: nproc_per_node must be at least 1, got {self.nproc_per_node}")


class elastic_launch:  # noqa: N801  (PyTorch's name)
    """elastic_launch(config, entrypoint)(*args) -> {global rank: entrypoint(*args) there}."""

    def __init__(self, config, entrypoint):
        self._config, self._entrypoint = config, entrypoint

    def __call__(self, *args):
        return launch_agent(self._config, self._entrypoint, list(args))


def _entrypoint_name(entrypoint, args):
    if callable(entrypoint):
        return getattr(entrypoint, "__qualname__", repr(entrypoint))
    if entrypoint == sys.executable:
        return next((a for a in args if not str(a).startswith("-")), "")
    return str(entrypoint)


def _rendezvous_flags(config, run_id):
    backend = config.rdzv_backend
    flags = [f"--nnodes={config.min_nodes}" if config.min_nodes == config.max_nodes
             else f"--nnodes={config.min_nodes}:{config.max_nodes}"]
    if config.max_nodes == 1 and not config.rdzv_endpoint:
        return flags + ["--standalone"]  # (one node, a store on a free port here)
    if backend in ("etcd", "etcd-v2"):
        raise ValueError(f"LaunchConfig: rdzv_backend={backend!r} is not available (trainrun's backends: 'c10d' "
                         "and 'static'; both need no service besides the store)")
    if backend not in ("c10d", "static"):
        raise ValueError(f"LaunchConfig: unknown rdzv_backend {backend!r} (trainrun's: 'c10d', 'static')")
    conf = ",".join(f"{k}={v}" for k, v in config.rdzv_configs.items())
    return flags + [f"--rdzv-backend={backend}", f"--rdzv-endpoint={config.rdzv_endpoint}", f"--rdzv-id={run_id}",
                    *([f"--rdzv-conf={conf}"] if conf else [])]


def launch_agent(config, entrypoint, args):
    """Runs the launcher for this node's workers and returns {global rank: return value} (None for a program)."""
    from trainrun.distributed.run import launcher_path
    run_id = config.run_id or str(uuid.uuid4().int)
    name = _entrypoint_name(entrypoint, args)
    with tempfile.TemporaryDirectory(prefix="trainrun-launch-") as work:
        if callable(entrypoint):
            main = getattr(sys.modules.get("__main__"), "__file__", None)
            payload = ("function", entrypoint, list(args), main)
        elif isinstance(entrypoint, str):
            payload = ("python" if entrypoint == sys.executable else "program", entrypoint, [str(a) for a in args],
                       None)
        else:
            raise TypeError(f"elastic_launch: entrypoint must be a callable or a program path, got "
                            f"{type(entrypoint).__name__}")
        payload_file = os.path.join(work, "entrypoint.pkl")
        with open(payload_file, "wb") as f:
            pickle.dump(payload, f)
        command = [launcher_path(), f"--nproc-per-node={config.nproc_per_node}", *_rendezvous_flags(config, run_id),
                   f"--max-restarts={config.max_restarts}", f"--monitor-interval={config.monitor_interval}",
                   f"--role={config.role}", *([f"--local-addr={config.local_addr}"] if config.local_addr else []),
                   "-m", "trainrun.distributed.launcher._entry", payload_file, work]
        # The workers import what this process can: this trainrun, and the caller's sys.path (as spawn passes it).
        package_root = str(pathlib.Path(__file__).resolve().parents[3])
        paths = [package_root, *(p for p in sys.path if p and os.path.isdir(p)),
                 *filter(None, [os.environ.get("PYTHONPATH")])]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)))
        returncode = subprocess.run(command, env=env).returncode
        results, failures = {}, {}
        for entry in os.listdir(work):
            stem, _, kind = entry.partition(".")
            if not stem.startswith("rank_"):
                continue
            rank = int(stem[len("rank_"):])
            if kind == "result":
                with open(os.path.join(work, entry), "rb") as f:
                    results[rank] = pickle.load(f)
            elif kind == "error":
                failure = _failure(os.path.join(work, entry), rank)
                failures[rank] = failure
        if returncode != 0:
            if not failures:  # (killed before it could say why: a signal, or the launcher's own error)
                failures[-1] = ProcessFailure(-1, -1, returncode, "")
            raise ChildFailedError(name, failures)
        return dict(sorted(results.items()))


def _failure(error_file, rank):
    import json
    with open(error_file) as f:
        data = json.load(f)
    return ProcessFailure(data.get("local_rank", rank), data.get("pid", -1), data.get("exitcode", 1), error_file,
                          rank=rank)
