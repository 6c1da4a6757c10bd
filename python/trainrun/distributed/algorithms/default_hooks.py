"""The built-in DDP communication hooks, under PyTorch's names
(torch.distributed.algorithms.ddp_comm_hooks.default_hooks): allreduce_hook
(DDP's own averaging) and fp16/bf16_compress_hook (each bucket travels as
float16 / bfloat16, half the bytes, is averaged, and comes back in its own
dtype). They run in C++; pass them to
DistributedDataParallel.register_comm_hook(state, hook)."""


def allreduce_hook(process_group, bucket):  # noqa: ARG001
    """DDP's own averaging all-reduce (registering it changes nothing)."""
    raise RuntimeError("allreduce_hook runs inside DDP's reducer; register it with register_comm_hook")


def fp16_compress_hook(state, bucket):  # noqa: ARG001  (run in C++, see register_comm_hook)
    raise RuntimeError("fp16_compress_hook runs inside DDP's reducer; register it with register_comm_hook")


def bf16_compress_hook(state, bucket):  # noqa: ARG001
    raise RuntimeError("bf16_compress_hook runs inside DDP's reducer; register it with register_comm_hook")


BUILT_IN = {fp16_compress_hook: "fp16_compress", bf16_compress_hook: "bf16_compress"}
