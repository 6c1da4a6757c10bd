"""trainrun.amp: automatic mixed precision, as torch.amp.

    with trainrun.autocast(device_type="cpu", dtype=trainrun.bfloat16):
        loss = loss_fn(model(x), y)      # matmuls in bfloat16, softmax/norms/sums in float32
    scaler.scale(loss).backward()        # gradients in float32, the parameters' dtype
    scaler.step(optimizer); scaler.update()

The casting happens at the dispatcher (tensor/autocast.h), so C++ layers and
Python modules alike are covered."""
from trainrun.amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_available, is_autocast_enabled  # noqa
from trainrun.amp.grad_scaler import GradScaler  # noqa: F401
from trainrun.amp.custom_autograd import custom_bwd, custom_fwd  # noqa: F401

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype", "is_autocast_available",
           "custom_fwd", "custom_bwd"]
