"""torch.cond(pred, true_fn, false_fn, operands): the branch pred picks, called on operands.

Inside a recording (trainrun.compile, export) a pred that is a tensor is one node of the program, as torch's
higher-order cond: the node reads pred and runs the branch it picks on the node's operands, at the recording and
at every replay, so the compiled call (or the exported program) takes either branch by the values it is given.
The branches run as Python (their ops are the node's own, not fused), so an exported program with a cond runs
from Python (ExportedProgram.module()) and not as an AOT package. A pred that is a Python bool (a shape test) is
decided when the call is recorded, as in torch."""
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
        if not _C._is_cpp_tensor(o):
            raise RuntimeError(f"cond: operands[{i}] is a {type(o).__name__}; operands must be tensors")
    if _C._is_cpp_tensor(pred):
        if pred.numel() != 1:
            raise RuntimeError(f"cond: pred must be a bool or a tensor of one element, got a tensor of shape "
                               f"{list(pred.shape)}")
        if _C._capture_active():
            return _recorded_cond(pred, true_fn, false_fn, tuple(operands))
        pred = bool(pred.item())
    elif not isinstance(pred, (bool, int)):
        raise RuntimeError(f"cond: pred must be a bool or a one-element tensor, got {type(pred).__name__}")
    return true_fn(*operands) if pred else false_fn(*operands)


def _branch_outputs(result):
    """The tensors a branch returned (a tensor, or a tuple or list of them), and how to rebuild its structure."""
    from trainrun._compile import _flatten
    leaves = []
    spec = _flatten(result, leaves)
    if len(leaves) == 0:
        raise RuntimeError("cond: a branch must return a tensor or a tuple or list of tensors, got "
                           f"{type(result).__name__}")
    return leaves, spec


def _recorded_cond(pred, true_fn, false_fn, operands):
    """cond as one node of the recording: it reads pred and the operands, and runs the branch pred picks each
    time the program runs. Both branches must give tensors of one structure, dtype and rank."""
    from trainrun._compile import _unflatten
    inputs = [pred, *operands]

    def branch(tensors):  # the tensors and structure of the branch pred picks (an input returned: a copy)
        leaves, spec = _branch_outputs((true_fn if bool(tensors[0].item()) else false_fn)(*tensors[1:]))
        return [t.clone() if any(t is i for i in tensors) else t for t in leaves], spec

    def run(tensors):
        return branch(tensors)[0]

    _C._external_begin()
    try:
        leaves, spec = branch(inputs)
    except BaseException:
        _C._external_abort()
        raise
    names = "/".join(getattr(f, "__qualname__", type(f).__name__) for f in (true_fn, false_fn))
    _C._external_end("higher_order::cond", run, inputs, leaves, key=f"higher_order::cond({names})")
    return _unflatten(spec, iter(leaves))
