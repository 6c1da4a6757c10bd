"""torch.distributed.algorithms.ddp_comm_hooks.default_hooks: allreduce and fp16/bf16 compression (run in C++,
trainrun.distributed.algorithms.default_hooks), and the wrappers that compress around any other hook."""
from trainrun.distributed.algorithms.default_hooks import (BUILT_IN, allreduce_hook, bf16_compress_hook,  # noqa: F401
                                                           fp16_compress_hook)


def _compress_wrapper(hook, dtype, name):
    def compress_wrapper_hook(hook_state, bucket):
        import trainrun
        original = bucket.buffer()
        bucket.set_buffer(original.to(dtype))
        future = hook(hook_state, bucket)

        def decompress(fut):
            value = fut.value()
            value = value[0] if isinstance(value, (list, tuple)) else value
            with trainrun.no_grad():
                original.copy_(value.reshape(original.shape))  # (in place: no second full-precision bucket)
            return original
        return future.then(decompress)
    compress_wrapper_hook.__name__ = name
    return compress_wrapper_hook


def fp16_compress_wrapper(hook):
    """A hook that runs `hook` on the bucket cast to float16 and casts its result back (PowerSGD on half the
    bytes: `ddp.register_comm_hook(state, fp16_compress_wrapper(powerSGD_hook))`)."""
    import trainrun
    return _compress_wrapper(hook, trainrun.float16, "fp16_compress_wrapper_hook")


def bf16_compress_wrapper(hook):
    """As fp16_compress_wrapper, in bfloat16."""
    import trainrun
    return _compress_wrapper(hook, trainrun.bfloat16, "bf16_compress_wrapper_hook")
