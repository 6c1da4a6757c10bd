"""The lookup functions of torch.nn.functional: embedding (padding_idx's
row gets no gradient), embedding_bag (bags reduced by sum, mean or max) and
one_hot."""
import numpy as np

from trainrun import _C
from trainrun._op_table import op


@op(function=False, functional=True)
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,  # noqa
              sparse=False):
    """The rows of weight at input. max_norm: the rows looked up are first scaled down in place to that
    norm (PyTorch's embedding_renorm_); scale_grad_by_freq: a row's gradient is divided by how often the
    batch looks it up; sparse=True is accepted and the gradient is dense (the same values; trainrun has no
    sparse tensors)."""
    if max_norm is not None:
        _renorm_rows(input, weight, float(max_norm), float(norm_type))
    out = _C.embedding(input, weight)
    if padding_idx is not None:  # the padding row gets no gradient
        keep = (input != (padding_idx % weight.shape[0])).unsqueeze(-1).to(out.dtype)
        out = out * keep + (out * (1 - keep)).detach()
    if scale_grad_by_freq and weight.requires_grad:
        counts = _C.zeros([weight.shape[0]], dtype=out.dtype, device=out.device).index_add(
            0, input.reshape([-1]), _C.ones([input.numel()], dtype=out.dtype, device=out.device))
        scale = (1.0 / counts.index_select(0, input.reshape([-1]))).reshape(list(input.shape) + [1])
        out = out * scale + (out * (1 - scale)).detach()  # (the value is out; the gradient is scaled)
    return out


def _renorm_rows(input, weight, max_norm, norm_type):
    from trainrun._autograd import no_grad
    with no_grad():
        rows = input.reshape([-1]).unique()
        picked = weight.index_select(0, rows)
        norms = _C.norm(picked, norm_type, [1], True)
        scale = (max_norm / (norms + 1e-7)).clamp(None, 1.0)  # (rows under max_norm keep scale 1)
        weight.index_copy_(0, rows, picked * scale)


@op(function=False, functional=True)
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,  # noqa: A002
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embeddings: the rows of a 2-D input, or the slices of a 1-D input
    that `offsets` starts. Entries equal to padding_idx are left out (and not counted in a mean); an empty
    bag gives zeros."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag(): max_norm, scale_grad_by_freq and sparse are not supported")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag(): mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}').")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets).__name__}")
        bags, length = input.shape
        lengths = np.full(bags, length, dtype=np.int64)
        flat = input.reshape(-1)
    elif input.dim() == 1:
        if offsets is None or offsets.dim() != 1:
            raise ValueError("embedding_bag(): offsets has to be a 1D Tensor when input is 1D")
        starts = offsets.cpu().numpy().astype(np.int64)
        ends = np.append(starts[1:], input.shape[0]) if not include_last_offset else starts[1:]
        starts = starts if not include_last_offset else starts[:-1]
        if len(starts) and (starts[0] != 0 or np.any(np.diff(starts) < 0) or ends[-1] > input.shape[0]):
            raise ValueError(f"embedding_bag(): offsets must start at 0, never decrease and stay within the input's "
                             f"{input.shape[0]} entries, got {offsets.tolist()}")
        lengths = ends - starts
        flat = input.narrow(0, 0, int(ends[-1])) if len(ends) else input.narrow(0, 0, 0)
    else:
        raise ValueError(f"embedding_bag(): input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    weights = per_sample_weights.reshape(-1)[:flat.shape[0]] if per_sample_weights is not None else None
    bag_of = np.repeat(np.arange(len(lengths)), lengths)
    if padding_idx is not None:  # left out of every bag
        keep = (flat != (padding_idx % weight.shape[0])).cpu().numpy()
        lengths = np.bincount(bag_of[keep], minlength=len(lengths)).astype(np.int64)
        bag_of, where = bag_of[keep], _C.from_numpy(np.nonzero(keep)[0].astype(np.int64)).to(flat.device)
        flat = flat.index_select(0, where)
        weights = weights.index_select(0, where) if weights is not None else None
    rows = _C.embedding(flat, weight)
    if weights is not None:
        rows = rows * weights.unsqueeze(1).to(rows.dtype)
    dim = weight.shape[1]
    if mode == "max":
        parts = rows.split([int(n) for n in lengths], 0)
        return _C.stack([p.max(0).values if p.shape[0] else weight.new_zeros(dim) for p in parts], 0) \
            if len(parts) else weight.new_zeros(0, dim)
    index = _C.from_numpy(bag_of.astype(np.int64)).to(weight.device)
    out = weight.new_zeros(len(lengths), dim).index_add(0, index, rows)
    if mode == "mean":
        counts = _C.from_numpy(np.maximum(lengths, 1).astype(np.float32)).to(weight.device).to(out.dtype)
        out = out / counts.unsqueeze(1)
    return out


@op(function=False, functional=True)
def one_hot(tensor, num_classes=-1):
    return _C.one_hot(tensor, num_classes)
