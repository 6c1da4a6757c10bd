"""torch.utils.data._utils: the collate functions (collate.py) at the path PyTorch scripts import them from."""
from trainrun.utils.data._utils import collate  # noqa: F401
