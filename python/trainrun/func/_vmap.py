"""torch.func.vmap (torch.vmap): func mapped over a dimension of its inputs, the results stacked along out_dims.
trainrun runs func once per slice and stacks: the same values as PyTorch's batching rules, the same shapes and
nesting, without their speed (chunk_size, which bounds PyTorch's memory, is accepted and changes nothing here). randomness: "error" (PyTorch's default) and
"different" draw per slice here; "same" reseeds each slice from one draw."""
import trainrun
from trainrun import _C


def _size_along(tree, dims):
    sizes = set()

    def walk(value, dim):
        if dim is None:
            return
        if _C._is_cpp_tensor(value):
            if not -value.dim() <= dim < value.dim():
                raise ValueError(f"vmap: in_dim={dim} is out of bounds for a tensor of {value.dim()} dims")
            sizes.add(value.shape[dim])
        elif isinstance(value, (tuple, list)):
            for v, d in zip(value, dim if isinstance(dim, (tuple, list)) else [dim] * len(value)):
                walk(v, d)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, dim[k] if isinstance(dim, dict) else dim)
    walk(tree, dims)
    return sizes


def _slice(value, dim, i):
    if dim is None:
        return value
    if _C._is_cpp_tensor(value):
        return value.select(dim, i)
    if isinstance(value, (tuple, list)):
        dims = dim if isinstance(dim, (tuple, list)) else [dim] * len(value)
        return type(value)(_slice(v, d, i) for v, d in zip(value, dims))
    if isinstance(value, dict):
        return {k: _slice(v, dim[k] if isinstance(dim, dict) else dim, i) for k, v in value.items()}
    return value


def _stack(results, out_dims):
    first = results[0]
    if _C._is_cpp_tensor(first):
        if out_dims is None:
            return first
        return trainrun.stack(results, dim=out_dims)
    if isinstance(first, (tuple, list)):
        dims = out_dims if isinstance(out_dims, (tuple, list)) else [out_dims] * len(first)
        return type(first)(_stack([r[i] for r in results], d) for i, d in enumerate(dims))
    if isinstance(first, dict):
        return {k: _stack([r[k] for r in results], out_dims[k] if isinstance(out_dims, dict) else out_dims)
                for k in first}
    if isinstance(first, (int, float, bool)):
        return trainrun.tensor(results) if out_dims is not None else first
    raise ValueError(f"vmap: func must return tensors (or tuples, lists, dicts of them), got {type(first).__name__}")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got "
                           f"{randomness}")

    def wrapped(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if isinstance(in_dims, (tuple, list)) and len(in_dims) != len(args):
            raise ValueError(f"vmap: in_dims is not compatible with the structure of inputs: expected {len(args)} "
                             f"entries, got {len(in_dims)}")
        sizes = _size_along(list(args), list(dims))
        if not sizes:
            raise ValueError("vmap: at least one input must be a tensor mapped over a dim (in_dims all None)")
        if len(sizes) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sorted(sizes)} for the mapped dimension")
        n = sizes.pop()
        seed = int(trainrun.randint(0, 2 ** 62, (1,)).item()) if randomness == "same" else None
        results = []
        for i in range(n):
            if seed is not None:
                trainrun.manual_seed(seed)
            results.append(func(*(_slice(a, d, i) for a, d in zip(args, dims)), **kwargs))
        return _stack(results, out_dims)
    return wrapped
