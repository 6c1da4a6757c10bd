"""Splitting a step's arguments into microbatches and merging the outputs,
as PyTorch's pipelining: tensors split along dim 0 (TensorChunkSpec) with
tensor_split, anything else replicated; outputs concatenated along dim 0."""
from trainrun import _C


class TensorChunkSpec:
    def __init__(self, split_dim):
        self.split_dim = split_dim

    def __repr__(self):
        return f"TensorChunkSpec({self.split_dim})"


def split_args_kwargs_into_chunks(args, kwargs, chunks, args_chunk_spec=None, kwargs_chunk_spec=None):
    """(list of args tuples, list of kwargs dicts), one per microbatch."""
    def split(value, spec):
        if _C._is_cpp_tensor(value):
            dim = spec.split_dim if spec is not None else 0
            if value.shape[dim] < chunks:
                raise ValueError(f"pipelining: a tensor of {value.shape[dim]} rows along dim {dim} cannot make "
                                 f"{chunks} microbatches")
            return list(value.tensor_split(chunks, dim))
        return [value] * chunks
    arg_parts = [split(a, args_chunk_spec[i] if args_chunk_spec else None) for i, a in enumerate(args)]
    kwarg_parts = {k: split(v, (kwargs_chunk_spec or {}).get(k)) for k, v in (kwargs or {}).items()}
    return ([tuple(p[m] for p in arg_parts) for m in range(chunks)],
            [{k: p[m] for k, p in kwarg_parts.items()} for m in range(chunks)])


def merge_chunks(chunks):
    """The microbatches' outputs joined along dim 0 (tuples element-wise)."""
    first = chunks[0]
    if _C._is_cpp_tensor(first):
        return _C.cat(list(chunks), 0)
    if isinstance(first, (tuple, list)):
        return type(first)(merge_chunks([c[i] for c in chunks]) for i in range(len(first)))
    return chunks
