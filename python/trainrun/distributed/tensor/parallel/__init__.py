"""trainrun.distributed.tensor.parallel: tensor parallelism with PyTorch's
names: parallelize_module, ColwiseParallel, RowwiseParallel,
SequenceParallel, PrepareModuleInput, PrepareModuleOutput, PrepareModuleInputOutput, loss_parallel."""
from trainrun.distributed.tensor.parallel.api import parallelize_module  # noqa: F401
from trainrun.distributed.tensor.parallel.loss import loss_parallel  # noqa: F401
from trainrun.distributed.tensor.parallel.style import (ColwiseParallel, ParallelStyle,  # noqa: F401
                                                         PrepareModuleInput, PrepareModuleInputOutput,
                                                         PrepareModuleOutput, RowwiseParallel, SequenceParallel)


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
