"""The Python op table: an op written in Python (a composite of core ops, so
autograd differentiates it for free) is declared once, with PyTorch's
signature, and bound from here as `trainrun.<name>`, as a `Tensor` method
and/or as `trainrun.nn.functional.<name>`, so the three never drift apart:

    @op(method=True)
    def flip(input, dims): ...

A method receives the tensor as `input`, as PyTorch's do. `inplace=True` also
binds `Tensor.<name>_`, which writes the result back into the tensor."""
from trainrun import _C

_float32 = _C.dtype.float32

_functions = {}    # name -> callable, bound as trainrun.<name>
_functional = {}   # name -> callable, bound as trainrun.nn.functional.<name>


def op(function=True, method=False, functional=False, inplace=False, name=None, aliases=(),
       float32_under_autocast=False):
    """float32_under_autocast: in an autocast region, floating tensor arguments on an autocast device are
    cast to float32 first (PyTorch's float32 list: the losses)."""
    def register(fn):
        if float32_under_autocast:
            fn = _float32_under_autocast(fn)
        names = (name or fn.__name__,) + tuple(aliases)
        for n in names:
            if function:
                _functions[n] = fn
            if functional:
                _functional[n] = fn
            if method:
                setattr(_C.Tensor, n, fn)
            if inplace:
                setattr(_C.Tensor, n + "_", _writing_back(fn, n + "_"))
        return fn
    return register


def _float32_under_autocast(fn):
    import functools

    def cast(a):
        if _C._is_cpp_tensor(a) and a.is_floating_point() and a.dtype != _float32 and \
                _C._get_autocast(a.device.type)[0]:
            return a.float()
        return a

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if not (_C._get_autocast("cpu")[0] or _C._get_autocast("cuda")[0]):
            return fn(*args, **kwargs)
        return fn(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
    return wrapped


def _writing_back(fn, name):
    def method(self, *args, **kwargs):
        self.copy_(fn(self, *args, **kwargs))
        return self
    method.__name__ = name
    method.__doc__ = f"In-place form: writes {fn.__name__}(self, ...) back into self and returns self."
    return method


def functions():
    return dict(_functions)


def functional():
    return dict(_functional)


def int_list(args, where, what="sizes", keyword=None):
    """Sizes or dims given PyTorch's ways: f(2, 3), f((2, 3)), f([2, 3]), f(trainrun.Size), or by keyword
    (f(size=(2, 3)): pass it as `keyword`; not both)."""
    if keyword is not None:
        if args:
            raise TypeError(f"{where}() got its {what} both positionally and by keyword")
        args = (keyword,)
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    out = []
    for a in args:
        if isinstance(a, bool) or not hasattr(a, "__index__"):
            raise TypeError(f"{where}(): {what} must be ints, got {type(a).__name__}")
        out.append(a.__index__())
    return out


def wrap_dim(dim, ndim, where):
    if isinstance(dim, bool) or not hasattr(dim, "__index__"):
        raise TypeError(f"{where}(): dim must be an int, got {type(dim).__name__}")
    d = dim.__index__()
    bound = max(ndim, 1)
    if not -bound <= d < bound:
        raise IndexError(f"{where}(): dim {dim} is out of range for a tensor of {ndim} dimensions "
                         f"(expected in [{-bound}, {bound - 1}])")
    return d % bound
