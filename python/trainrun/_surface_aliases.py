"""Small parts of PyTorch's surface that are other names or thin forms of what trainrun has: the in-place
activations of torch.nn.functional (F.elu_, ...), torch.nn.init's deprecated names, linalg's
multi_dot/vecdot/matmul/diagonal/vander/cond/solve_triangular and the *_ex forms, torch.distributed's debug
levels and coalesced collectives, and nn.DataParallel (one device per process here: it runs its module)."""
import enum
import functools
import os
import warnings

import trainrun
from trainrun import _C
from trainrun import distributed as dist
from trainrun import linalg, nn
from trainrun.nn import functional as F
from trainrun.nn import init


# ---- torch.nn.functional's in-place activations ----------------------------------------------------------
def _in_place_activation(name):
    fn = getattr(F, name)

    @functools.wraps(fn)
    def activation(input, *args, **kwargs):  # noqa: A002
        fn(input, *args, inplace=True, **kwargs)
        return input
    activation.__name__ = name + "_"
    return activation


for _name in ("elu", "celu", "selu", "hardtanh", "leaky_relu", "threshold", "rrelu"):
    if not hasattr(F, _name + "_"):
        setattr(F, _name + "_", _in_place_activation(_name))


# ---- torch.nn.init's deprecated names (each warns and calls the one with the underscore) ----------------
def _deprecated_init(name):
    fn = getattr(init, name + "_")

    @functools.wraps(fn)
    def deprecated(*args, **kwargs):
        warnings.warn(f"nn.init.{name} is now deprecated in favor of nn.init.{name}_.", FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    deprecated.__name__ = name
    return deprecated


for _name in ("uniform", "normal", "constant", "xavier_uniform", "xavier_normal", "kaiming_uniform",
              "kaiming_normal", "orthogonal", "sparse", "eye", "dirac"):
    if not hasattr(init, _name) and hasattr(init, _name + "_"):
        setattr(init, _name, _deprecated_init(_name))


# ---- torch.linalg ---------------------------------------------------------------------------------------
def multi_dot(tensors, *, out=None):
    """The product of the matrices in order (a first 1-D one is a row, a last 1-D one a column)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    result = tensors[0]
    for t in tensors[1:]:
        result = trainrun.matmul(result, t)
    return result


def vecdot(x, y, *, dim=-1, out=None):
    return (x * y).sum(dim)


def vander(x, *, N=None):  # noqa: N803
    """Columns x^0, x^1, ..., x^(N-1) (increasing powers, as linalg.vander; torch.vander's default decreases)."""
    n = x.shape[-1] if N is None else N
    return _C.stack([x ** k for k in range(n)], -1) if n else x.unsqueeze(-1)[..., :0]


def cond(A, p=None):  # noqa: N803
    """The condition number: ||A|| ||A^-1|| in norm p (default 2: the ratio of the extreme singular values)."""
    if p is None or p == 2 or p == -2:
        s = linalg.svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    return linalg.matrix_norm(A, p) * linalg.matrix_norm(linalg.inv(A), p)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):  # noqa: N803
    """X with A X = B (or X A = B when left=False) for a triangular A (the other triangle is not read)."""
    T = A.triu() if upper else A.tril()  # noqa: N806
    if unitriangular:
        eye = trainrun.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        T = T * (1 - eye) + eye  # noqa: N806
    if left:
        return linalg.solve(T, B)
    return linalg.solve(T.transpose(-2, -1), B.transpose(-2, -1)).transpose(-2, -1)


def _with_info(fn, name, fields):
    import collections
    result_type = collections.namedtuple(f"linalg_{name}", fields)  # (PyTorch's result names: linalg_inv_ex)

    def ex(*args, check_errors=False, out=None, **kwargs):
        value = fn(*args, **kwargs)
        values = value if isinstance(value, tuple) else (value,)
        info = _C.zeros(list(values[0].shape[:-2]), dtype=_C.dtype.int32)
        return result_type(*values, info)
    ex.__name__ = name
    return ex


for _name, _value in (("multi_dot", multi_dot), ("vecdot", vecdot), ("vander", vander), ("cond", cond),
                      ("solve_triangular", solve_triangular), ("matmul", trainrun.matmul),
                      ("diagonal", lambda A, *, offset=0, dim1=-2, dim2=-1: A.diagonal(offset, dim1, dim2)),
                      ("inv_ex", _with_info(linalg.inv, "inv_ex", ["inverse", "info"])),
                      ("solve_ex", _with_info(linalg.solve, "solve_ex", ["result", "info"]))):
    if not hasattr(linalg, _name):
        setattr(linalg, _name, _value)
if hasattr(linalg, "cholesky") and not hasattr(linalg, "cholesky_ex"):
    linalg.cholesky_ex = _with_info(linalg.cholesky, "cholesky_ex", ["L", "info"])


# ---- torch.distributed ----------------------------------------------------------------------------------
class DebugLevel(enum.Enum):
    OFF = 0
    INFO = 1
    DETAIL = 2


_debug_level = [DebugLevel.__members__.get(os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF").upper(), DebugLevel.OFF)]


def get_debug_level():
    return _debug_level[0]


def set_debug_level(level):
    _debug_level[0] = level


def set_debug_level_from_env():
    value = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF").upper()
    if value not in DebugLevel.__members__:
        raise ValueError(f"TORCH_DISTRIBUTED_DEBUG must be OFF, INFO or DETAIL, got {value!r}")
    _debug_level[0] = DebugLevel[value]


def all_reduce_coalesced(tensors, op=None, group=None, async_op=False):
    """Each tensor all-reduced (one collective per tensor, in order)."""
    for t in tensors:
        dist.all_reduce(t, op=op if op is not None else dist.ReduceOp.SUM, group=group)
    return None


def all_gather_coalesced(output_tensor_lists, input_tensor_list, group=None, async_op=False):
    for outputs, t in zip(output_tensor_lists, input_tensor_list):
        dist.all_gather(outputs, t, group=group)
    return None


for _name, _value in (("DebugLevel", DebugLevel), ("get_debug_level", get_debug_level),
                      ("set_debug_level", set_debug_level), ("set_debug_level_from_env", set_debug_level_from_env),
                      ("is_mpi_available", lambda: False), ("is_ucc_available", lambda: False),
                      ("all_reduce_coalesced", all_reduce_coalesced), ("all_gather_coalesced", all_gather_coalesced)):
    if not hasattr(dist, _name):
        setattr(dist, _name, _value)
if not hasattr(dist, "GradBucket"):
    from trainrun.nn.parallel import GradBucket
    dist.GradBucket = GradBucket


# ---- nn.DataParallel ------------------------------------------------------------------------------------
class DataParallel(nn.Module):
    """PyTorch's single-process multi-GPU wrapper. trainrun drives one device per process (use
    DistributedDataParallel across processes), so this runs its module on the inputs as they are; state dict
    keys start with "module." as PyTorch's."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if device_ids is not None and len(list(device_ids)) > 1:
            warnings.warn("DataParallel: trainrun runs one device per process; the module runs on one device "
                          "(use DistributedDataParallel to use several)", UserWarning, stacklevel=2)
        self.module, self.device_ids, self.output_device, self.dim = module, device_ids, output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """PyTorch's functional DataParallel: module on the inputs (a tuple, or one input), on one device here."""
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    return DataParallel(module, device_ids, output_device, dim)(*inputs, **(module_kwargs or {}))


if not hasattr(nn, "DataParallel"):
    from trainrun.nn import parallel as _parallel
    nn.DataParallel = _parallel.DataParallel = DataParallel
    _parallel.data_parallel = data_parallel
