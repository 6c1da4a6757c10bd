"""torch.distributed._composable: the paths PyTorch 2.1-2.5 scripts import the composable APIs from.
`_composable.fsdp` is FSDP2 (trainrun.distributed.fsdp's fully_shard); `checkpoint(module)` makes a module's
forward recompute its activations in backward (what `checkpoint_wrapper` does, without a wrapper module);
`replicate(module)` is data parallelism applied in place (DistributedDataParallel's gradient sync)."""
from trainrun.distributed._composable.checkpoint_activation import checkpoint  # noqa: F401
from trainrun.distributed._composable.replicate import replicate  # noqa: F401


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
