"""torch.nn.attention: SDPBackend and sdpa_kernel. trainrun's scaled_dot_product_attention has one
implementation (the math one, on the CPU and CUDA); sdpa_kernel checks the backends it is given and runs the
block, and a list without MATH raises, as PyTorch does when none of the allowed kernels can run."""
import contextlib
import enum


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    chosen = list(backends) if isinstance(backends, (list, tuple, set)) else [backends]
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise TypeError(f"sdpa_kernel: expected SDPBackend values, got {b!r}")
    if SDPBackend.MATH not in chosen:
        raise RuntimeError(f"sdpa_kernel({[b.name for b in chosen]}): trainrun has the MATH backend only; allow "
                           "SDPBackend.MATH")
    yield


from trainrun.nn.attention import bias  # noqa: E402,F401  (causal_lower_right, causal_upper_left)

__all__ = ["SDPBackend", "sdpa_kernel"]
