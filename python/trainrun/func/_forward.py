"""torch.func's forward-mode transforms: jvp, linearize, jacfwd and hessian. trainrun's autograd is reverse mode
only, so a Jacobian-vector product is taken by the double-backward trick (J v is the gradient, with respect to
u, of (u^T J) v), which needs the function's backward to be differentiable; every op with a derivative formula
here is. jacfwd builds the same Jacobian as jacrev (rows of vector-Jacobian products)."""
import trainrun
from trainrun import _C
from trainrun import _autograd_functional as functional
from trainrun.func._grad import jacrev


def _as_tuple(x, what):
    if isinstance(x, (tuple, list)) and all(_C._is_cpp_tensor(t) for t in x):
        return tuple(x)
    raise RuntimeError(f"jvp: Expected {what} to be a tuple of Tensors, got {type(x).__name__}")


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J(primals) @ tangents): primals and tangents are tuples of tensors of the same shapes."""
    primals, tangents = _as_tuple(primals, "primals"), _as_tuple(tangents, "tangents")
    if len(primals) != len(tangents):
        raise RuntimeError(f"jvp: Expected primals and tangents to have the same length, got {len(primals)} and "
                           f"{len(tangents)}")
    for i, (p, t) in enumerate(zip(primals, tangents)):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp: Expected primals[{i}] and tangents[{i}] to have the same shape, got "
                               f"{list(p.shape)} and {list(t.shape)}")
    aux = []

    def without_aux(*xs):
        result = func(*xs)
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError("jvp(f, primals, tangents): output of function f should be a tuple: "
                                   "(output, aux) if has_aux is True")
            aux.append(result[1])
            return result[0]
        return result

    output, product = functional.jvp(without_aux, primals, tangents, strict=strict)
    if has_aux:
        from trainrun.func._grad import _detached
        return output, product, _detached(aux[0])
    return output, product


def linearize(func, *primals):
    """(func(*primals), jvp_fn): jvp_fn(*tangents) gives J(primals) @ tangents for any tangents."""
    output = func(*[p.detach() for p in primals])

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]
    return (output.detach() if _C._is_cpp_tensor(output) else output), jvp_fn


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian of func's output with respect to argument argnums, of shape
    output.shape + input.shape (the same values jacrev gives)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """torch.func.hessian: the Hessian of func's one-element output with respect to argument argnums, of shape
    input.shape + input.shape."""
    if not isinstance(argnums, int):
        raise NotImplementedError("hessian: argnums as a tuple is not supported; pass one argument index")

    def wrapper(*args):
        def bound(x):
            full = list(args)
            full[argnums] = x
            out = func(*full)
            return out.reshape([]) if _C._is_cpp_tensor(out) and out.numel() == 1 else out
        with trainrun.enable_grad():
            return functional.hessian(bound, args[argnums])
    return wrapper


def functionalize(func, *, remove="mutations"):
    """torch.func.functionalize: the same function with its in-place ops replaced by out-of-place ones (for
    transforms that cannot see mutation). trainrun's transforms see mutation through autograd already, so the
    function is returned as it is: its results are the same."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are: remove='mutations' and remove='mutations_and_views'")
    return func


def replace_all_batch_norm_modules_(root):
    """In place, every batch norm of root stops tracking running statistics (what vmap over a model needs)."""
    from trainrun.nn.modules.batchnorm import _BatchNorm
    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.track_running_stats = False
            module.running_mean = module.running_var = module.num_batches_tracked = None
    return root
