"""torch.cond(pred, true_fn, false_fn, operands): the branch pred picks, called on operands.

trainrun records the ops a call makes, so it records the branch taken, not both: a pred that is a Python bool (a
shape test) is decided when the call is recorded, and one that is a tensor is read (a graph break: the compiled
call runs eagerly for those guards, with the same result; export refuses it naming the read)."""
from trainrun import _C

__all__ = ["cond"]


def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred else false_fn(*operands). pred is a bool or a one-element tensor; operands a
    tuple or list (of tensors, as PyTorch requires)."""
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError(f"cond: true_fn and false_fn must be callable, got {type(true_fn).__name__} and "
                        f"{type(false_fn).__name__}")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"cond: operands must be a tuple or list of tensors, got {type(operands).__name__}")
    for i, o in enumerate(operands):
        if not isinstance(o, _C.Tensor):
            raise RuntimeError(f"cond: operands[{i}] is a {type(o).__name__}; operands must be tensors")
    if isinstance(pred, _C.Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"cond: pred must be a bool or a tensor of one element, got a tensor of shape "
                               f"{list(pred.shape)}")
        pred = bool(pred.item())
    elif not isinstance(pred, (bool, int)):
        raise RuntimeError(f"cond: pred must be a bool or a one-element tensor, got {type(pred).__name__}")
    return true_fn(*operands) if pred else false_fn(*operands)
