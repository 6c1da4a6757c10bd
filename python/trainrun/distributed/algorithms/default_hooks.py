"""The built-in DDP communication hooks, under PyTorch's names
(torch.distributed.algorithms.ddp_comm_hooks.default_hooks): each bucket
travels as float16 / bfloat16 (half the bytes), is averaged, and comes back
in its own dtype. They run in C++; pass them to
DistributedDataParallel.register_comm_hook(state, hook)."""


def fp16_compress_hook(state, bucket):  # noqa: ARG001  (run in C++, see register_comm_hook)
    raise RuntimeError("fp16_compress_hook runs inside DDP's reducer; register it with register_comm_hook")


def bf16_compress_hook(state, bucket):  # noqa: ARG001
    raise RuntimeError("bf16_compress_hook runs inside DDP's reducer; register it with register_comm_hook")


BUILT_IN = {fp16_compress_hook: "fp16_compress", bf16_compress_hook: "bf16_compress"}
