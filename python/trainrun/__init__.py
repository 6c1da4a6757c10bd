"""trainrun: a distributed training runtime with PyTorch's API.

Tensors, dtypes, factories and ops follow PyTorch's names and behaviour, so
code ports by search-and-replace. The C++ core is the extension module
trainrun._C; this package adds the Python side (operators, indexing,
no_grad, tensor()).
"""
import importlib.machinery
import importlib.util
import pathlib
import sys


def _load_extension():
    """trainrun._C: installed next to this file, or built by Bazel in this
    source tree (bazel-bin/python/trainrun/_C.so)."""
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here / "_C.so", here.parents[1] / "bazel-bin" / "python" / "trainrun" / "_C.so"]
    for path in candidates:
        if path.exists():
            loader = importlib.machinery.ExtensionFileLoader("trainrun._C", str(path))
            spec = importlib.util.spec_from_file_location("trainrun._C", str(path), loader=loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules["trainrun._C"] = module
            return module
    raise ImportError("trainrun._C is not built: run scripts/bazel.sh build //python:trainrun/_C.so "
                      f"(looked in {', '.join(str(c) for c in candidates)})")


_C = _load_extension()

from trainrun._tensor import Tensor, tensor  # noqa: E402
from trainrun._legacy_tensor_types import TYPES as _LEGACY_TENSOR_TYPES  # noqa: E402
globals().update(_LEGACY_TENSOR_TYPES)  # torch.FloatTensor, torch.LongTensor, ...
from trainrun._memory_format import (channels_last, channels_last_3d, contiguous_format,  # noqa: E402,F401
                                   memory_format, preserve_format)
from trainrun._autograd import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: E402
from trainrun import autograd, nn, optim, distributed, cuda, utils, serialization  # noqa: E402,F401
from trainrun import library  # noqa: E402,F401  (custom operators: trainrun.library.custom_op)
from trainrun._ops import ops  # noqa: E402,F401  (trainrun.ops.<namespace>.<name>, as torch.ops)

dtype = _C.dtype
dtype.__repr__ = dtype.__str__ = lambda self: "trainrun." + self.name
bool = _C.dtype.bool  # noqa: A001  (PyTorch's name)
uint8, int8, int16, int32, int64 = _C.dtype.uint8, _C.dtype.int8, _C.dtype.int16, _C.dtype.int32, _C.dtype.int64
float16, bfloat16, float32, float64 = _C.dtype.float16, _C.dtype.bfloat16, _C.dtype.float32, _C.dtype.float64
half, float, double, long, int, short = float16, float32, float64, int64, int32, int16  # noqa: A001

device = _C.device
from trainrun._default_device import get_default_device, set_default_device  # noqa: E402,F401  (device's `with`)
from_numpy, from_dlpack = _C.from_numpy, _C.from_dlpack
def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """Writes obj (tensors, state dicts, a whole training checkpoint of dicts, lists and numbers) in
    PyTorch's zip format, which torch.load and trainrun.load read; a path ending in .safetensors gets a
    safetensors file instead (obj must then be a dict of tensors)."""
    from trainrun import _torch_checkpoint
    if pickle_module is not None:
        raise NotImplementedError("save(pickle_module=...) is not supported")
    if isinstance(f, (str, pathlib.PurePath)) and str(f).endswith(".safetensors"):
        return _C.save(obj, str(f))
    _torch_checkpoint.save_torch_checkpoint(obj, f if not isinstance(f, pathlib.PurePath) else str(f))


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Reads a safetensors file (what trainrun.save writes) or a torch.save
    checkpoint. The latter is unpickled, by default (weights_only=None or True,
    PyTorch 2.6's default), with only tensors, storages, plain containers and
    serialization.add_safe_globals' objects allowed; anything else is refused,
    naming it, so no foreign code runs. weights_only=False unpickles anything
    (a whole module; PyTorch's torch.* names are trainrun's), for checkpoints
    whose source is trusted. map_location: a device (or its name) every tensor
    is moved to, a dict from saved locations to new ones ({"cuda:0":
    "cuda:1"}), or a function (storage, location) as torch.load takes
    (`lambda storage, loc: storage` keeps tensors here). mmap=True is accepted
    and reads the storages into memory."""
    from trainrun import _torch_checkpoint
    if pickle_module is not None or pickle_load_args:
        given = ["pickle_module"] if pickle_module is not None else []
        given += sorted(pickle_load_args)
        raise NotImplementedError(f"load(): {', '.join(given)} not supported (trainrun reads weights only, with "
                                  "its own restricted unpickler)")
    if map_location is not None and not isinstance(map_location, (str, device, dict)) and not callable(map_location):
        raise TypeError(f"load(): map_location must be a device, its name, a dict of locations or a function, got "
                        f"{type(map_location).__name__}")
    path = f if hasattr(f, "read") else str(f)
    if _torch_checkpoint.is_torch_checkpoint(path):
        result = _torch_checkpoint.load_torch_checkpoint(path, weights_only=weights_only is not False)
    elif hasattr(f, "read"):
        raise ValueError("load(): a file object must hold a torch.save checkpoint (safetensors are read by path)")
    else:
        result = _C.load(path)
    if map_location is None or (isinstance(map_location, (str, device)) and str(map_location) == "cpu"):
        return result
    return _to_device(result, map_location)


def _mapped(t, where):
    """Where map_location sends tensor t: a device; a dict from saved locations ("cuda:0") to new ones
    (a location not in it stays); or a function (storage, location) -> storage, called with the tensor."""
    location = str(t.device)
    if isinstance(where, dict):
        target = where.get(location, location)
        return t if str(target) == location else t.to(target)
    if callable(where) and not isinstance(where, device):
        moved = where(t, location)
        return t if moved is None else moved
    return t.to(where)


def _to_device(value, where):
    """Every tensor inside dicts, lists and tuples moved as map_location says."""
    if _C._is_cpp_tensor(value):
        return _mapped(value, where)
    if isinstance(value, dict):
        return type(value)((k, _to_device(v, where)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, where) for v in value)
    return value


from trainrun._generator import Generator, default_generator, randperm  # noqa: E402,F401


set_num_threads, get_num_threads = _C.set_num_threads, _C.get_num_threads
_num_interop_threads = None


def set_num_interop_threads(num):
    """Accepted for PyTorch scripts: trainrun runs independent ops in the order given (no inter-op pool)."""
    global _num_interop_threads
    if not isinstance(num, int) or num < 1:
        raise ValueError(f"set_num_interop_threads: expected a positive int, got {num!r}")
    _num_interop_threads = num


def get_num_interop_threads():
    return _num_interop_threads or 1


def manual_seed(seed):
    """Seeds trainrun's random ops and the default Generator (permutations,
    shuffling); returns the default Generator, as PyTorch does."""
    if _C._capture_active():  # (a replay would not reseed: the call runs eagerly, reseeding each time)
        _C._note_graph_break("manual_seed() was called (a replay would draw on without reseeding)")
    return default_generator.manual_seed(seed)


def initial_seed():
    return default_generator.initial_seed()


from trainrun._factories import (arange, empty, empty_like, empty_strided, eye, full, full_like, linspace,  # noqa
                                 ones, ones_like, rand, rand_like, randint, randn, randn_like, zeros, zeros_like)
# The op list's functions whose bindings are generated from it (with PyTorch's arguments and out=), then
# the rest bound from C++ by hand (Python wraps some of them further down).
from trainrun import _op_list  # noqa: E402
for _op in _op_list.ops():
    if "function" in _op.python and (_op.binding == "generated" or "pointwise" in _op.tags):
        globals()[_op.python_name] = getattr(_C, _op.python_name)
for _name in ("matmul", "cat", "stack", "masked_fill", "softmax", "log_softmax", "scatter", "norm",
              "bmm", "chunk", "split", "dot", "outer"):
    globals()[_name] = getattr(_C, _name)
del _name, _op
from trainrun import return_types  # noqa: E402,F401
from trainrun._size import Size  # noqa: E402,F401


def var(input, dim=None, unbiased=True, keepdim=False, *, correction=None):  # noqa: A002
    return input.var(dim, unbiased, keepdim, correction=correction)


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None):  # noqa: A002
    return input.std(dim, unbiased, keepdim, correction=correction)


def isnan(input):  # noqa: A002
    return input.isnan()


def isinf(input):  # noqa: A002
    return input.isinf()


def isfinite(input):  # noqa: A002
    return input.isfinite()


from trainrun._reductions import max, min, sort, topk  # noqa: E402,A004
from trainrun import _op_table, _ops_shape, _ops_index, _ops_math, _ops_linalg, _ops_random  # noqa: E402,F401
from trainrun import _ops_composite_extras  # noqa: E402,F401
globals().update(_op_table.functions())  # every op declared in the op table, under its PyTorch name
from trainrun._tensor_extras import (as_tensor, clone, detach, get_default_dtype, inference_mode,  # noqa: E402,F401
                                     is_floating_point, is_tensor, numel, typename, asarray, isposinf, isneginf, isreal,
                                     layout, strided, sparse_coo, set_default_dtype, promote_types,
                                     can_cast, result_type, finfo, iinfo, is_inference_mode_enabled)
from trainrun._compile import compile  # noqa: E402,F401,A004
from trainrun import export  # noqa: E402,F401  (trainrun.export.export, and trainrun.export(...) itself)
from trainrun.export import aot_compile, aot_load  # noqa: E402,F401
from trainrun import compiler, _dynamo, _export, _functorch, _inductor, _logging, fx  # noqa: E402,F401
from trainrun._cond import cond  # noqa: E402,F401

from trainrun.nn.functional import conv2d, max_pool2d  # noqa: E402,F401  (torch.conv2d, torch.max_pool2d)
from trainrun import _tensor_pickling  # noqa: E402,F401  (deepcopy, pickle, share_memory_)
from trainrun import _inplace_views  # noqa: E402,F401  (unsqueeze_, t_, resize_, ...)
from trainrun import multiprocessing  # noqa: E402,F401
from trainrun import amp  # noqa: E402,F401  (autocast, GradScaler)
from trainrun.amp._device_modules import install as _install_amp  # noqa: E402
_install_amp()
from trainrun import random, backends, testing  # noqa: E402,F401
from trainrun import _stack_handler  # noqa: E402
_stack_handler.start()  # under `trainrun --agent-port`: the agent's DumpStacks asks this process for its stacks
from trainrun.random import get_rng_state, set_rng_state, seed  # noqa: E402,F401

_deterministic = {"mode": False, "warn_only": False}
_matmul_precision = "highest"


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Accepted, and read back by are_deterministic_algorithms_enabled(): trainrun's kernels are already
    deterministic (reductions and scatters do not depend on thread timing; no atomics-order dependence)."""
    _deterministic.update(mode=True if mode else False, warn_only=True if warn_only else False)  # (bool: the dtype here)


def are_deterministic_algorithms_enabled():
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


def set_float32_matmul_precision(precision):
    """"highest" keeps float32 matrix products in float32; "high" and "medium" allow TF32 on CUDA."""
    global _matmul_precision
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: expected 'highest', 'high' or 'medium'")
    _matmul_precision = precision
    cuda.matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision():
    return _matmul_precision
from trainrun import linalg  # noqa: E402,F401
from trainrun import fft  # noqa: E402,F401  (torch.fft: transforms over ComplexTensors)
from trainrun import _stft  # noqa: E402,F401  (torch.stft, torch.istft)
from trainrun import _torch_level_nn  # noqa: E402,F401  (torch.dropout, torch.layer_norm, torch.conv1d, ...)
from trainrun import _surface_aliases  # noqa: E402,F401  (F.elu_, init.xavier_uniform, linalg.multi_dot, nn.DataParallel, ...)
from trainrun import distributions, func  # noqa: E402,F401
from trainrun import jit, profiler, version  # noqa: E402,F401
from trainrun import _ops_aliases  # noqa: E402,F401  (multiply, greater, logit, hann_window, ...)
from trainrun import _gamma_functions, special  # noqa: E402,F401  (lgamma, digamma; torch.special)
from trainrun import _complex  # noqa: E402,F401  (view_as_complex, polar, view_as_real: rotary embeddings)
from trainrun._anomaly_mode import is_anomaly_enabled, is_anomaly_check_nan_enabled  # noqa: E402,F401
from trainrun.version import __version__  # noqa: E402,F401
from trainrun._printoptions import get_printoptions, set_printoptions  # noqa: E402,F401
from trainrun.func import vmap  # noqa: E402,F401  (torch.vmap)


def round(input, *, decimals=0, out=None):  # noqa: A001,A002  (PyTorch's names)
    """Round half to even, at `decimals` places."""
    result = input.round(decimals=decimals)
    if out is None:
        return result
    out.copy_(result)
    return out


from trainrun import _out_arguments  # noqa: E402
_out_arguments.install(globals())  # out= on the functions whose bindings lack it (torch.matmul(a, b, out=c))
from trainrun import _tensor_extras  # noqa: E402
_tensor_extras.install_more_in_place()  # (x.cumsum_(0), x.greater_(y), ...: once every method exists)
from trainrun import _torch_level_extras  # noqa: E402
_torch_level_extras.install(globals())  # (torch.inf, torch.relu_, torch.select_scatter, torch.gradient, ...)
from trainrun import _typed_storage  # noqa: E402
_typed_storage.install(globals())  # (Tensor.storage(), torch.TypedStorage, torch.UntypedStorage, torch.is_storage)
from trainrun import _torch_level_devices  # noqa: E402
_torch_level_devices.install(globals())  # (torch.accelerator, torch.range, unravel_index, autocast state, ...)
_torch_level_devices.install_absent_devices(globals())  # (torch.mps, torch.xpu: not here)
_torch_level_devices.install_generic_streams(globals())  # (torch.Stream, torch.Event)
from trainrun import signal  # noqa: E402,F401  (torch.signal.windows)
from trainrun import hub  # noqa: E402,F401  (torch.hub)
from trainrun import onnx  # noqa: E402,F401  (torch.onnx: its names; trainrun writes no ONNX)
from trainrun import _utils  # noqa: E402,F401  (torch._utils: private helpers scripts import by this path)
from trainrun import _module_paths  # noqa: E402
_module_paths.install()  # (torch.autograd.profiler, torch.storage, torch.nn.utils.weight_norm, ... as modules)
from trainrun import _torch_level_more  # noqa: E402
_torch_level_more.install(globals())  # (torch.view_copy, torch.sym_int, torch.kl_div, torch.bitwise_left_shift, ...)
from trainrun import overrides  # noqa: E402  (last: it wraps every public function for __torch_function__)
overrides.install()
