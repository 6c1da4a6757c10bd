"""torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks: noop_hook, for measuring how much of a step the
gradient all-reduce costs (the gradients are left unsynchronized: for that measurement only)."""


def noop_hook(_, bucket):
    import trainrun
    future = trainrun.futures.Future()
    future.set_result(bucket.buffer())
    return future
