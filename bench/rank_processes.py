"""Starts the ranks of a benchmark as separate processes (the environment
env:// reads, rank 0 hosting the store) and returns rank 0's output. Shared by
bench/collectives.py and bench/ddp.py, whose PyTorch side cannot run under
trainrun's launcher."""
import os
import socket
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank0_output(command, world, env=None, timeout=1800):
    """Runs `world` ranks of `command`; exits naming the program when one fails.
    Every rank still running at the timeout (or after a failure) is killed."""
    port = free_port()
    procs = []
    try:
        for rank in range(world):
            rank_env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                            MASTER_PORT=str(port), LOCAL_RANK=str(rank), **(env or {}))
            procs.append(subprocess.Popen(command, env=rank_env, text=True,
                                          stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL))
        out, _ = procs[0].communicate(timeout=timeout)
        for p in procs[1:]:
            p.wait(timeout=timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode != 0 for p in procs):
        sys.exit(f"a rank of {command[0]} failed")
    return out
