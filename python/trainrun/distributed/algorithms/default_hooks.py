"""The built-in DDP communication hooks, under PyTorch's names
(torch.distributed.algorithms.ddp_comm_hooks.default_hooks): allreduce_hook
(DDP's own averaging) and fp16/bf16_compress_hook (each bucket travels as
float16 / bfloat16, half the bytes, is averaged, and comes back in its own
dtype). Registered with DistributedDataParallel.register_comm_hook(state, hook) they run in C++; called from
another hook (a wrapper's, a user's), they run here and return a Future, as PyTorch's."""


def _group(process_group):
    from trainrun import distributed as dist
    return process_group if process_group is not None else dist.group.WORLD


def allreduce_hook(process_group, bucket):
    """DDP's own averaging all-reduce: the bucket divided by the group's size, all-reduced; a Future of it.
    Registered as is, DDP runs it in C++; called from another hook, it runs here."""
    from trainrun import distributed as dist
    group = _group(process_group)
    tensor = bucket.buffer()
    tensor.div_(dist.get_world_size(group))
    return dist.all_reduce(tensor, group=group, async_op=True).get_future().then(lambda fut: fut.value()[0])


def _compressed_allreduce(process_group, bucket, dtype):
    from trainrun import distributed as dist
    group = _group(process_group)
    buffer = bucket.buffer()
    compressed = buffer.to(dtype).div_(dist.get_world_size(group))

    def decompress(fut):
        buffer.copy_(fut.value()[0])  # (back in the bucket's own dtype, in place)
        return buffer
    return dist.all_reduce(compressed, group=group, async_op=True).get_future().then(decompress)


def fp16_compress_hook(process_group, bucket):
    """The bucket averaged as float16 (half the bytes), back in its own dtype; a Future of it."""
    import trainrun
    return _compressed_allreduce(process_group, bucket, trainrun.float16)


def bf16_compress_hook(process_group, bucket):
    """As fp16_compress_hook, in bfloat16."""
    import trainrun
    return _compressed_allreduce(process_group, bucket, trainrun.bfloat16)


BUILT_IN = {fp16_compress_hook: "fp16_compress", bf16_compress_hook: "bf16_compress"}
