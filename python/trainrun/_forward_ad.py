"""torch.autograd.forward_ad: dual tensors (primal, tangent) inside a dual_level. trainrun's autograd is reverse
mode only, so forward mode is emulated: make_dual gives a tensor that requires grad and records its tangent;
unpack_dual(output) takes the Jacobian-vector product J t by the double-backward trick (the gradient of
(u^T J) t with respect to u), over the duals of the current level the output depends on. The values equal
forward mode's; each unpack costs two backward passes instead of riding along the forward."""
import collections
import contextlib

from trainrun import _C

UnpackedDualTensor = collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])
_levels = []  # one dict per open level: id(dual) -> (dual, primal given, tangent)


def enter_dual_level():
    _levels.append({})
    return len(_levels) - 1


def exit_dual_level(*, level=None):
    level = len(_levels) - 1 if level is None else level
    if level != len(_levels) - 1 or level < 0:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created")
    _levels.pop()


@contextlib.contextmanager
def dual_level():
    """Inside it, make_dual / unpack_dual work; the duals made are forgotten when it closes."""
    level = enter_dual_level()
    try:
        yield level
    finally:
        exit_dual_level(level=level)


def _level(level, where):
    if not _levels:
        raise RuntimeError(f"{where}: To create or use a dual Tensor, you need to be inside a dual_level context "
                           "(with torch.autograd.forward_ad.dual_level():)")
    return _levels[-1 if level is None else level]


def make_dual(tensor, tangent, *, level=None):
    """A tensor with tensor's values that carries tangent as its forward gradient."""
    duals = _level(level, "make_dual")
    if not _C._is_cpp_tensor(tensor) or not _C._is_cpp_tensor(tangent):
        raise TypeError("make_dual: expected tensor and tangent to be Tensors")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if not tensor.is_floating_point():
        raise ValueError("make_dual: expected a floating point primal")
    from trainrun._autograd import enable_grad
    with enable_grad():
        dual = tensor.view_as(tensor) if tensor.requires_grad else tensor.detach().requires_grad_(True)
    duals[id(dual)] = (dual, tensor, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent): tangent is J t over the level's duals, None when tensor does not depend on any."""
    duals = _level(level, "unpack_dual")
    if id(tensor) in duals and duals[id(tensor)][0] is tensor:
        _, primal, tangent = duals[id(tensor)]
        return UnpackedDualTensor(primal, tangent)
    if not _C._is_cpp_tensor(tensor) or not tensor.requires_grad or not duals:
        return UnpackedDualTensor(tensor, None)
    from trainrun import autograd
    from trainrun._autograd import enable_grad
    leaves = [entry[0] for entry in duals.values()]
    tangents = [entry[2] for entry in duals.values()]
    with enable_grad():
        u = _C.zeros(list(tensor.shape), dtype=tensor.dtype).requires_grad_(True)
        grads = autograd.grad(tensor, leaves, u, create_graph=True, allow_unused=True)
        pairs = [(g, t) for g, t in zip(grads, tangents) if g is not None and g.requires_grad]
        if not pairs:
            return UnpackedDualTensor(tensor, None if all(g is None for g in grads) else _C.zeros(
                list(tensor.shape), dtype=tensor.dtype))
        product = autograd.grad([g for g, _ in pairs], u, [t.to(g.dtype) for g, t in pairs], allow_unused=True)[0]
    if product is None:
        product = _C.zeros(list(tensor.shape), dtype=tensor.dtype)
    return UnpackedDualTensor(tensor, product.detach())
