"""The Tensor methods DTensor has no sharding rule for (installed last, after _ops and _ops_coverage), so that
every Tensor method works on a DTensor:

- other names of methods it has (multiply -> mul, swapaxes -> transpose, arccos -> acos, ...);
- more elementwise methods (dtype conversions, lgamma, logaddexp, fmax, ...) and the in-place forms of the
  elementwise ones, through the pointwise rule on the local pieces;
- what describes or moves the local piece (is_contiguous, data_ptr, cpu, pin_memory) and autograd's handles
  (grad_fn, register_hook, retain_grad), which see DTensors as PyTorch's do;
- everything else by replication: the operands are gathered whole on every rank, the op runs there, and
  tensor results are Replicate DTensors (differentiable: the gather's backward cuts the gradient back to the
  pieces). Correct for any op, but it moves the whole tensor: an op worth sharding gets a rule of its own. An
  in-place op written this way writes each rank's piece of the result back; one that changes the shape
  (squeeze_, t_, ...) replaces the DTensor's piece and layout.
Some methods have no meaning for a tensor split over ranks (as_strided, set_, resize_, record_stream): those
raise, naming the method. The function forms of the methods added here dispatch to them (torch.flip(dt, ...))."""
import functools

from trainrun import _C, _op_list
from trainrun.distributed.tensor import _ops
from trainrun.distributed.tensor._dtensor import DTensor
from trainrun.distributed.tensor._ops_coverage import _dispatching, _method_call, _pointwise_call
from trainrun.distributed.tensor._redistribute import redistribute_local
from trainrun.distributed.tensor.placement_types import Replicate

_ALIASES = {"absolute": "abs", "absolute_": "abs_", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
            "arcsinh": "asinh", "arctan": "atan", "arctanh": "atanh", "arctan2": "atan2", "multiply": "mul",
            "multiply_": "mul_", "divide": "div", "divide_": "div_", "subtract": "sub", "subtract_": "sub_",
            "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
            "negative": "neg", "negative_": "neg_", "fix": "trunc", "swapaxes": "transpose", "swapdims": "transpose",
            "moveaxis": "movedim", "clip_": "clamp_", "true_divide_": "div_", "greater_": "gt_", "less_": "lt_"}
_ELEMENTWISE = ("acosh", "asinh", "atanh", "deg2rad", "rad2deg", "digamma", "lgamma", "erfinv", "sinc", "positive",
                "logaddexp", "logaddexp2", "fmax", "fmin", "ldexp", "polygamma", "mvlgamma", "isclose", "isposinf",
                "isneginf", "isreal", "nextafter", "gcd", "lcm", "where", "sgn", "sign", "remainder", "float_power",
                "copysign", "heaviside", "hypot", "xlogy", "logit", "nan_to_num", "exp2", "erf", "erfc", "frac")
_CONVERSIONS = {"bool": "bool", "byte": "uint8", "char": "int8", "short": "int16", "int": "int32",
                "long": "int64"}
_DESCRIBE_LOCAL = ("is_contiguous", "data_ptr", "is_signed", "is_inference", "is_conj", "is_neg", "is_nested",
                   "is_pinned", "is_quantized", "is_sparse", "is_sparse_csr", "is_mkldnn", "is_mps", "is_xpu",
                   "is_ipu", "is_vulkan", "is_shared", "get_device", "storage_offset", "element_size",
                   "untyped_storage")
_MOVE_LOCAL = ("cpu", "cuda", "pin_memory")
_SHAPE_IN_PLACE = ("squeeze_", "unsqueeze_", "t_", "transpose_", "swapaxes_", "swapdims_")
_REFUSED = ("as_strided", "as_strided_", "set_", "resize_", "resize_as_", "as_subclass", "record_stream",
            "new_empty_strided", "share_memory_")


# ---- replication ---------------------------------------------------------------------------------------
def _whole(value):
    if isinstance(value, DTensor):
        return value.full_tensor()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_whole(v) for v in value)
    return value


def _replicated(value, mesh):
    if _C._is_cpp_tensor(value):
        return DTensor.from_local(value, mesh, [Replicate()] * mesh.ndim)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # (named tuples: values, indices)
        return type(value)(*(_replicated(v, mesh) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_replicated(v, mesh) for v in value)
    return value


def _by_replication(name):
    method = getattr(_C.Tensor, name)

    @functools.wraps(method)
    def replicated(self, *args, **kwargs):
        return _replicated(method(self.full_tensor(), *_whole(args), **{k: _whole(v) for k, v in kwargs.items()}),
                           self.device_mesh)
    return replicated


def _in_place_by_replication(name):
    method = getattr(_C.Tensor, name)

    @functools.wraps(method)
    def in_place(self, *args, **kwargs):
        if any(p.is_partial() for p in self.placements):
            raise ValueError(f"DTensor {name}: a Partial DTensor's pieces are summands; redistribute it first")
        whole = self.full_tensor()
        method(whole, *_whole(args), **{k: _whole(v) for k, v in kwargs.items()})
        mesh = self.device_mesh
        piece = redistribute_local(whole, tuple(self.shape), mesh, tuple(Replicate() for _ in range(mesh.ndim)),
                                   self.placements)
        if piece is not self._local_tensor:
            self._local_tensor.copy_(piece)
        return self
    return in_place


def _shape_in_place(name):
    def in_place(self, *args):
        result = getattr(self, _ALIASES.get(name[:-1], name[:-1]))(*args)
        self._local_tensor, self._spec = result._local_tensor, result._spec
        return self
    in_place.__name__ = name
    return in_place


def _refused(name):
    def refuse(self, *args, **kwargs):
        raise NotImplementedError(f"DTensor.{name}: a DTensor is split over ranks, so {name} has no meaning for it; "
                                  "call to_local() (this rank's piece) or full_tensor() first")
    refuse.__name__ = name
    return refuse


# ---- autograd's handles -----------------------------------------------------------------------------------
def _register_hook(self, hook):
    """hook(grad) sees the gradient as a DTensor laid out as this one; what it returns (None, or a DTensor)
    replaces it."""
    spec = self._spec

    def on_piece(grad):
        replaced = hook(DTensor(grad, spec))
        if replaced is None:
            return None
        return replaced.redistribute(spec.mesh, spec.placements).to_local() if isinstance(replaced, DTensor) \
            else replaced
    return self._local_tensor.register_hook(on_piece)


def _register_post_accumulate_grad_hook(self, hook):
    return self._local_tensor.register_post_accumulate_grad_hook(lambda _piece: hook(self))


def install():
    Tensor = _C.Tensor
    for alias, target in _ALIASES.items():
        if alias not in vars(DTensor) and hasattr(DTensor, target):
            setattr(DTensor, alias, getattr(DTensor, target))
    for name, dtype in _CONVERSIONS.items():
        if name not in vars(DTensor):
            setattr(DTensor, name, lambda self, _d=dtype: self.to(getattr(__import__("trainrun"), _d)))
    pointwise = set(_op_list.pointwise_methods(1) + _op_list.pointwise_methods(2) + _op_list.pointwise_methods(3))
    for name in _ELEMENTWISE:
        if name not in vars(DTensor) and hasattr(Tensor, name):
            function = getattr(Tensor, name)
            setattr(DTensor, name, lambda self, *args, _f=function, _n=name, **kwargs: _pointwise_call(_n)(
                _f, self, *args, **kwargs))
            pointwise.add(name)
    for name in sorted(pointwise):
        if hasattr(Tensor, name + "_") and name + "_" not in vars(DTensor):
            setattr(DTensor, name + "_", _ops._in_place(name + "_", lambda args: False))
    for name in _DESCRIBE_LOCAL:
        if name not in vars(DTensor) and hasattr(Tensor, name):
            setattr(DTensor, name, lambda self, *args, _n=name, **kwargs: getattr(self._local_tensor, _n)(
                *args, **kwargs))
    for name in _MOVE_LOCAL:
        if name not in vars(DTensor) and hasattr(Tensor, name):
            setattr(DTensor, name, lambda self, *args, _n=name, **kwargs: DTensor(
                getattr(self._local_tensor, _n)(*args, **kwargs), self._spec))
    for name in _SHAPE_IN_PLACE:
        setattr(DTensor, name, _shape_in_place(name))
    for name in _REFUSED:
        setattr(DTensor, name, _refused(name))
    DTensor.grad_fn = property(lambda self: self._local_tensor.grad_fn)
    DTensor.retains_grad = property(lambda self: self._local_tensor.retains_grad)
    DTensor.retain_grad = lambda self: self._local_tensor.retain_grad()
    DTensor.register_hook = _register_hook
    DTensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
    DTensor.mT = property(lambda self: self.transpose(-2, -1))
    DTensor.mH = DTensor.mT  # (real tensors)
    DTensor.H = property(lambda self: self.t())
    DTensor.real = property(lambda self: self)
    DTensor.to_dense = lambda self, dtype=None, *, masked_grad=None: self if dtype is None else self.to(dtype)
    DTensor.new_tensor = lambda self, data, **kwargs: self._local_tensor.new_tensor(data, **kwargs)
    for name in sorted(dir(Tensor)):
        if name.startswith("_") or hasattr(DTensor, name):
            continue
        if not callable(getattr(Tensor, name, None)):  # (attributes: the piece's, e.g. imag raising as Tensor's)
            setattr(DTensor, name, property(lambda self, _n=name: getattr(self._local_tensor, _n)))
            continue
        setattr(DTensor, name, _in_place_by_replication(name) if name.endswith("_") else _by_replication(name))
    import trainrun
    for name in sorted(n for n in vars(DTensor) if not n.startswith("_") and callable(vars(DTensor)[n])):
        # the function forms of the methods added here (torch.flip(dt, ...) -> dt.flip(...)), as _ops_coverage
        # did for the earlier ones
        if hasattr(trainrun, name) and callable(getattr(trainrun, name)) and name != "from_local":
            _dispatching(trainrun, name, _method_call(name))
