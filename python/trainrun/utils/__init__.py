"""trainrun.utils: data loading (trainrun.utils.data) and activation
checkpointing (trainrun.utils.checkpoint), as torch.utils."""
from trainrun.utils import data  # noqa: F401
from trainrun.utils import checkpoint  # noqa: F401
from trainrun.utils import hooks  # noqa: F401  (RemovableHandle)
