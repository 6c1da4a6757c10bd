"""Draining: the launcher agent's Drain call (`trainrun drain HOST:PORT`, or
gRPC from a controller before node maintenance) asks every worker to save a
checkpoint and exit with DRAIN_EXIT_CODE (138, "retry me elsewhere" in
Kubeflow's convention). The agent then exits with 138 and does not restart
the workers itself; what runs the job restarts it where it can. A training
loop checks between steps:

    from trainrun.distributed.elastic import DRAIN_EXIT_CODE, drain_requested
    for step in ...:
        train_step()
        if drain_requested():
            save_checkpoint()
            sys.exit(DRAIN_EXIT_CODE)

Workers that have not exited when the drain's timeout passes are stopped
(SIGTERM, then SIGKILL after the grace period)."""
import os

DRAIN_EXIT_CODE = 138


def drain_requested():
    """True once the agent has accepted a Drain (a stat of the file the agent names in TRAINRUN_DRAIN_FILE; always
    False outside the launcher). Every rank sees it within the same monitor interval, but ranks may check at
    different steps: agree on the step before checkpointing, e.g. with an all_reduce of the flag (MAX)."""
    path = os.environ.get("TRAINRUN_DRAIN_FILE")
    return bool(path) and os.path.exists(path)
