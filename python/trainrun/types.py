"""trainrun.types, as torch.types: the aliases used in annotations (`def f(x: Tensor, size: _size) -> Number`)."""
import builtins
from typing import List, Sequence, Tuple, Union

from trainrun import Size, Tensor, device as _device, dtype as _dtype  # noqa: F401
from trainrun import layout as _layout  # noqa: F401

_bool = builtins.bool
_int = builtins.int
_float = builtins.float
_complex = builtins.complex
_str = builtins.str
_bytes = builtins.bytes
_size = Union[Size, List[_int], Tuple[_int, ...]]
_symsize = _size  # (no symbolic ints here: sizes are ints)
_TensorOrTensors = Union[Tensor, Sequence[Tensor]]
_TensorOrTensorsOrGradEdge = _TensorOrTensors
IntLikeType = _int
FloatLikeType = _float
BoolLikeType = _bool
Number = Union[_int, _float, _bool]
Device = Union[_device, _str, _int, None]
py_sym_types = ()
