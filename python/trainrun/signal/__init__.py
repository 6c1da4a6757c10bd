"""trainrun.signal, as torch.signal: window functions (trainrun.signal.windows)."""
from trainrun.signal import windows  # noqa: F401
