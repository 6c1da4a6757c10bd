"""out= for the functions whose own binding lacks it (torch.matmul(a, b, out=c), torch.sum(x, 0, out=s),
torch.max(x, 1, out=(values, indices)), ...). The result is computed as without out, then written into out with
PyTorch's rules: out takes the result's shape (resized when it differs, with PyTorch's warning when it held
elements), its dtype must be one the result casts to (no float into an integer tensor), and no argument may
require grad while grad mode is on (PyTorch's functions with out= are not differentiable). Returns out, or for
(values, indices) results the named tuple of the out tensors."""
import functools
import warnings

from trainrun import _C

# PyTorch's functions with out= whose trainrun binding has none of its own (the generated op bindings take it
# where tensor/ops.yaml declares it). Checked at import: each must exist.
NAMES = (
    "addbmm", "addmm", "addmv", "addr", "amax", "amin", "argmax", "argmin", "atan2", "baddbmm", "bmm", "bucketize",
    "cat", "ceil", "clamp", "clamp_max", "clamp_min", "cosh", "cross", "cummax", "cummin", "cumprod", "cumsum",
    "deg2rad", "diag", "diff", "dot", "erfinv", "exp2", "expm1", "floor_divide", "fmod", "frac", "gather", "hstack",
    "index_select", "inner", "isin", "kron", "kthvalue", "lgamma", "log10", "log2", "logaddexp", "logcumsumexp",
    "logit", "logsumexp", "masked_select", "matmul", "max", "mean", "median", "min", "mode", "mv", "nan_to_num",
    "nanmean", "nansum", "norm", "outer", "prod", "quantile", "rad2deg", "reciprocal", "searchsorted", "signbit",
    "sinh", "sort", "square", "stack", "std", "sum", "take", "tan", "tensordot", "topk", "tril", "triu",
    "true_divide", "trunc", "var", "vstack", "xlogy", "asin", "acos", "atan", "arcsin", "arccos", "arctan",
)


def _can_cast(source, target):
    """PyTorch's canCast: no floating result into an integer or bool tensor, no non-bool result into bool."""
    if source.is_floating_point and not target.is_floating_point:
        return False
    return not (target == _C.dtype.bool and source != _C.dtype.bool)


def _write(name, out, result):
    if not _C._is_cpp_tensor(out):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if not _can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{name}(): result type {result.dtype.name} can't be cast to the desired output type "
                           f"{out.dtype.name}")
    if out.device != result.device:
        raise RuntimeError(f"{name}(): out is on {out.device}, the result on {result.device}")
    if tuple(out.shape) != tuple(result.shape):
        if out.numel():
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                          f"which does not match the required output shape {list(result.shape)}. This behavior is "
                          "deprecated, and in a future PyTorch release outputs will not be resized unless they have "
                          "zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                          "elements with t.resize_(0).", UserWarning, stacklevel=3)
        out.set_(result.to(out.dtype).contiguous().clone())  # (a storage of the result's size, only out's)
        return out
    out.copy_(result)
    return out


def _requires_grad(values):
    for v in values:
        if _C._is_cpp_tensor(v):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False


def with_out(fn, name):
    """fn, taking out= as PyTorch's function of that name does."""
    @functools.wraps(fn)
    def function(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if _C.is_grad_enabled() and _requires_grad(args + tuple(kwargs.values()) + outs):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
        result = fn(*args, **kwargs)
        if _C._is_cpp_tensor(result):
            if len(outs) != 1:
                raise TypeError(f"{name}(): out must be a Tensor, got a sequence of {len(outs)}")
            return _write(name, outs[0], result)
        if len(outs) != len(result):
            raise TypeError(f"{name}(): out must be a tuple of {len(result)} tensors, got {len(outs)}")
        written = [_write(name, o, r) for o, r in zip(outs, result)]
        return type(result)(*written) if hasattr(result, "_fields") else type(result)(written)
    function._without_out = fn
    return function


def install(namespace):
    """Rebinds each of NAMES in `namespace` (the trainrun module's) to take out=."""
    for name in NAMES:
        fn = namespace[name]
        if getattr(fn, "_without_out", None) is None:
            namespace[name] = with_out(fn, name)
