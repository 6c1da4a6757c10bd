"""torch.nn.utils.stateless: functional_call, the older home of torch.func.functional_call."""
from trainrun.func import functional_call  # noqa: F401

__all__ = ["functional_call"]
