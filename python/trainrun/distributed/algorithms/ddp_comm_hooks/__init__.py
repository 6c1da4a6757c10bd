"""torch.distributed.algorithms.ddp_comm_hooks: the built-in hooks, at PyTorch's import path (default_hooks:
allreduce and fp16/bf16 compression, in C++, and the wrappers that compress around another hook; powerSGD_hook:
PowerSGD low-rank compression; debugging_hooks: noop_hook), and register_ddp_comm_hook by DDPCommHookType."""
from enum import Enum
from functools import partial

from trainrun.distributed.algorithms.ddp_comm_hooks import (debugging_hooks, default_hooks,  # noqa: F401
                                                            powerSGD_hook)

default, powerSGD, debugging = default_hooks, powerSGD_hook, debugging_hooks  # (PyTorch's short names)
__all__ = ["DDPCommHookType", "register_ddp_comm_hook"]


def _ddp_comm_hook_wrapper(comm_hook, model, state):
    model.register_comm_hook(state, comm_hook)


def _powerSGD_comm_hook_wrapper(comm_hook, model, state, matrix_approximation_rank,  # noqa: N802
                                start_powerSGD_iter=1_000):
    """`state` is a process group (or None), as for the other hooks; the PowerSGD state is made around it."""
    powerSGD_state = powerSGD.PowerSGDState(process_group=state, matrix_approximation_rank=matrix_approximation_rank,
                                            start_powerSGD_iter=start_powerSGD_iter)
    model.register_comm_hook(powerSGD_state, comm_hook)


class DDPCommHookType(Enum):
    """The built-in hooks by name: `DDPCommHookType.FP16_COMPRESS.value(model=ddp, state=group)` registers one."""
    ALLREDUCE = partial(_ddp_comm_hook_wrapper, comm_hook=default.allreduce_hook)
    FP16_COMPRESS = partial(_ddp_comm_hook_wrapper, comm_hook=default.fp16_compress_hook)
    BF16_COMPRESS = partial(_ddp_comm_hook_wrapper, comm_hook=default.bf16_compress_hook)
    POWER_SGD = partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.powerSGD_hook, matrix_approximation_rank=1)
    POWER_SGD_RANK2 = partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.powerSGD_hook,
                              matrix_approximation_rank=2)
    BATCHED_POWER_SGD = partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.batched_powerSGD_hook,
                                matrix_approximation_rank=1)
    BATCHED_POWER_SGD_RANK2 = partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.batched_powerSGD_hook,
                                      matrix_approximation_rank=2)
    NOOP = partial(_ddp_comm_hook_wrapper, comm_hook=debugging.noop_hook)


def register_ddp_comm_hook(comm_hook_type, model, state=None):
    """Registers the named built-in hook on a DDP model; `state` is the process group (None: the default)."""
    if not isinstance(comm_hook_type, DDPCommHookType):
        raise TypeError(f"register_ddp_comm_hook: comm_hook_type must be a DDPCommHookType, got "
                        f"{type(comm_hook_type).__name__}")
    comm_hook_type.value(model=model, state=state)
