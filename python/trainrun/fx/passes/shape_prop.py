"""ShapeProp, as torch.fx.passes.shape_prop: runs a GraphModule node by node on example inputs and records what
each node produced in node.meta["tensor_meta"] (a TensorMetadata per tensor, nested as the value is: a tuple of
them for a node returning a tuple); nodes producing no tensor get no entry."""
from typing import NamedTuple

import trainrun
from trainrun.fx.interpreter import Interpreter

__all__ = ["ShapeProp", "TensorMetadata"]


class TensorMetadata(NamedTuple):
    shape: object
    dtype: object
    requires_grad: bool
    stride: tuple
    memory_format: object
    is_quantized: bool
    qparams: dict


def _extract_tensor_metadata(result, include_contiguity=True):
    memory_format = None
    if include_contiguity:
        for fmt in (trainrun.contiguous_format, trainrun.channels_last, trainrun.channels_last_3d):
            if result.is_contiguous(memory_format=fmt):
                memory_format = fmt
                break
    return TensorMetadata(result.shape, result.dtype, result.requires_grad, tuple(result.stride()), memory_format,
                          False, {})


def _map_tensors(value, fn):
    if trainrun._C._is_cpp_tensor(value):
        return fn(value)
    if isinstance(value, (list, tuple)):
        mapped = [_map_tensors(v, fn) for v in value]
        return type(value)(*mapped) if hasattr(value, "_fields") else type(value)(mapped)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


class ShapeProp(Interpreter):
    def __init__(self, gm, fake_mode=None):
        super().__init__(gm)
        self.fake_mode = fake_mode  # (accepted: the example inputs run for real here)

    def run_node(self, n):
        try:
            result = super().run_node(n)
        except Exception as e:
            raise RuntimeError(f"ShapeProp error for: node={n.format_node()} with meta={n.meta}") from e
        found = []

        def extract(t):
            found.append(True)
            return _extract_tensor_metadata(t)
        meta = _map_tensors(result, extract)
        if found:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args):
        """The module's result on these sample inputs, each node's meta filled on the way."""
        return super().run(*args)
