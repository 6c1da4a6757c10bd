"""What an optimizer holds for a parameter it is given."""
from trainrun import _C


def local_params(params):
    """The tensors an optimizer updates: a DTensor parameter (tensor parallelism, fully_shard) is its local
    piece, the tensor its module holds, so updating it updates the module."""
    if isinstance(params, _C.Tensor) or hasattr(params, "to_local"):
        params = [params]
    return [p.to_local() if not isinstance(p, (_C.Tensor, dict)) and hasattr(p, "to_local") else p
            for p in params]
