"""nn.Parameter: a tensor that a Module registers as a parameter."""
from trainrun import _C


class Parameter(_C.Tensor):
    """Shares `data`'s memory; requires grad unless told otherwise."""

    def __init__(self, data, requires_grad=True):
        super().__init__(data.detach())
        self.requires_grad = requires_grad

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
