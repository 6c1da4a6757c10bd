"""torch._functorch: its config (AOTAutograd's settings, which PyTorch scripts set before torch.compile)."""
from trainrun._functorch import config  # noqa: F401
