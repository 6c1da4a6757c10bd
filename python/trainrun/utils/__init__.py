"""trainrun.utils: data loading (trainrun.utils.data) and activation
checkpointing (trainrun.utils.checkpoint), as torch.utils."""
from trainrun.utils import data  # noqa: F401
from trainrun.utils import checkpoint  # noqa: F401
from trainrun.utils import hooks  # noqa: F401  (RemovableHandle)
from trainrun.utils import _pytree  # noqa: F401  (torch.utils._pytree, loaded with torch as in PyTorch)


def swap_tensors(t1, t2):
    """Swaps what two tensors hold (their memory and shape, requires_grad and grad) while each Python object stays
    where it is referenced, as torch.utils.swap_tensors. (Here the two must have one dtype: a trainrun tensor's
    dtype is fixed when it is made.)"""
    from trainrun import _C
    from trainrun._autograd import no_grad
    if not (_C._is_cpp_tensor(t1) and _C._is_cpp_tensor(t2)):
        raise TypeError("swap_tensors: expected two tensors")
    if t1.dtype != t2.dtype:
        raise TypeError(f"swap_tensors: the tensors must have one dtype here (got {t1.dtype} and {t2.dtype})")
    grads = (t1.grad, t2.grad)
    requires = (t1.requires_grad, t2.requires_grad)
    t1.grad = t2.grad = None
    with no_grad():
        t1.requires_grad_(False), t2.requires_grad_(False)
        holder = _C.empty([0], dtype=t1.dtype).set_(t1)
        t1.set_(t2)
        t2.set_(holder)
    t1.requires_grad_(requires[1]), t2.requires_grad_(requires[0])
    t1.grad, t2.grad = grads[1], grads[0]
