"""trainrun.utils: data loading (trainrun.utils.data), as torch.utils."""
from trainrun.utils import data  # noqa: F401
