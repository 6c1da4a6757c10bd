"""torch.nn.attention.flex_attention (PyTorch 2.5): attention whose scores a user function modifies
(score_mod: relative position biases, ALiBi, soft-capping) and whose mask a user function describes (mask_mod:
causal, sliding window, documents packed in one sequence), without writing a kernel.

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx
    block_mask = create_block_mask(causal, B=None, H=None, Q_LEN=1024, KV_LEN=1024)
    out = flex_attention(q, k, v, score_mod=lambda s, b, h, q_idx, kv_idx: s + bias[h], block_mask=block_mask)

The mods are called once per call on index tensors laid out to broadcast over (batch, head, query, key) (b of
shape [B, 1, 1, 1], h [1, H, 1, 1], q_idx [1, 1, L, 1], kv_idx [1, 1, 1, S]), so what PyTorch vmaps over
scalars (elementwise arithmetic, comparisons, torch.where, indexing a tensor by an index) computes the same
here in one pass, and gradients reach tensors the mods read. The attention itself is the math one (scores,
softmax, weighted sum) on the CPU or CUDA: a BlockMask's blocks describe the mask (sparsity(), to_string())
but no block is skipped. A query row that the mask hides entirely gives zeros (and a log-sum-exp of -inf), as
PyTorch's."""
import math

import trainrun
from trainrun import _C

__all__ = ["BlockMask", "flex_attention", "create_block_mask", "create_mask", "and_masks", "or_masks",
           "noop_mask"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128


def noop_mask(b, h, q_idx, kv_idx):
    """The mask that hides nothing."""
    return _C.ones([], dtype=_C.dtype.bool, device=q_idx.device)


def and_masks(*mask_mods):
    """The mask_mod that keeps what every one of mask_mods keeps."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = _C.ones([], dtype=_C.dtype.bool, device=q_idx.device)
        for mod in mask_mods:
            result = result & mod(b, h, q_idx, kv_idx)
        return result
    return and_mask


def or_masks(*mask_mods):
    """The mask_mod that keeps what any one of mask_mods keeps."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = _C.zeros([], dtype=_C.dtype.bool, device=q_idx.device)
        for mod in mask_mods:
            result = result | mod(b, h, q_idx, kv_idx)
        return result
    return or_mask


def _index_grid(B, H, L, S, device):
    """(b, h, q_idx, kv_idx): int64 aranges shaped to broadcast over [B, H, L, S]."""
    def along(n, dim):
        shape = [1, 1, 1, 1]
        shape[dim] = n
        return _C.arange(n, dtype=_C.dtype.int64, device=device).reshape(shape)
    return along(B, 0), along(H, 1), along(L, 2), along(S, 3)


def _dense_mask(mask_mod, B, H, L, S, device):
    """mask_mod over the whole grid, as a bool tensor of shape [B, H, L, S]."""
    b, h, q, kv = _index_grid(B, H, L, S, device)
    keep = mask_mod(b, h, q, kv)
    if not _C._is_cpp_tensor(keep):
        keep = _C.full([], bool(keep), dtype=_C.dtype.bool, device=device)
    if keep.dtype != _C.dtype.bool:
        raise TypeError(f"mask_mod must return booleans, got {keep.dtype}")
    return keep.expand([B, H, L, S]).contiguous()


class BlockMask:
    """Which (query block, key block) tiles of the attention a mask_mod leaves anything in: per batch and head,
    kv_num_blocks/kv_indices (tiles partly kept) and full_kv_num_blocks/full_kv_indices (tiles wholly kept),
    as PyTorch's. Made by create_block_mask; flex_attention applies its mask_mod."""

    def __init__(self, mask_mod, dense, block_size):
        self.mask_mod = mask_mod
        self._dense = dense  # [B, H, Q_LEN, KV_LEN] bool
        B, H, L, S = dense.shape
        self.seq_lengths = (L, S)
        q_block, kv_block = block_size
        self.BLOCK_SIZE = (q_block, kv_block)
        nq, nkv = -(-L // q_block), -(-S // kv_block)
        padded = _C.zeros([B, H, nq * q_block, nkv * kv_block], dtype=_C.dtype.bool, device=dense.device)
        padded[:, :, :L, :S] = dense
        tiles = padded.reshape(B, H, nq, q_block, nkv, kv_block).permute(0, 1, 2, 4, 3, 5).reshape(B, H, nq, nkv, -1)
        counts = tiles.to(_C.dtype.int32).sum(-1)
        sizes = self._tile_sizes(L, S, nq, nkv, dense.device)
        full = counts == sizes
        partial = (counts > 0) & ~full
        self.kv_num_blocks, self.kv_indices = self._compressed(partial)
        self.full_kv_num_blocks, self.full_kv_indices = self._compressed(full)
        t_partial, t_full = partial.transpose(-1, -2), full.transpose(-1, -2)
        self.q_num_blocks, self.q_indices = self._compressed(t_partial)
        self.full_q_num_blocks, self.full_q_indices = self._compressed(t_full)
        self._partial, self._full = partial, full

    def _tile_sizes(self, L, S, nq, nkv, device):
        q_block, kv_block = self.BLOCK_SIZE
        rows = _C.full([nq], q_block, dtype=_C.dtype.int32, device=device)
        cols = _C.full([nkv], kv_block, dtype=_C.dtype.int32, device=device)
        rows[-1] = L - (nq - 1) * q_block
        cols[-1] = S - (nkv - 1) * kv_block
        return rows.reshape(nq, 1) * cols.reshape(1, nkv)

    @staticmethod
    def _compressed(blocks):
        """(number of marked blocks per row, their column indices first, then the others), int32."""
        counts = blocks.to(_C.dtype.int32).sum(-1)
        order = (~blocks).to(_C.dtype.int32).argsort(dim=-1, stable=True)
        return counts, order.to(_C.dtype.int32)

    @property
    def shape(self):
        """(B, H, Q_LEN, KV_LEN)."""
        return tuple(self._dense.shape)

    def numel(self):
        B, H, L, S = self.shape
        return B * H * L * S

    def sparsity(self):
        """The percentage of tiles with nothing to compute."""
        total = self._partial.numel()
        computed = int((self._partial | self._full).sum().item())
        return 100.0 * (1 - computed / total) if total else 0.0

    def to_dense(self):
        """Per batch and head, a [query blocks, key blocks] int32 map: 1 where the tile has anything kept."""
        return (self._partial | self._full).to(_C.dtype.int32)

    def to_string(self, grid_size=(20, 20), limit=4):
        """The tiles of the first `limit` (batch, head) pairs drawn as text: a full tile '█', a partial one '░'."""
        B, H = self.shape[:2]
        lines = []
        for b in range(B):
            for h in range(H):
                if len(lines) and limit is not None and len([s for s in lines if s.startswith("(")]) >= limit:
                    break
                lines.append(f"({b}, {h})")
                full, partial = self._full[b, h], self._partial[b, h]
                for i in range(min(full.shape[0], grid_size[0])):
                    row = "".join("█" if full[i, j].item() else "░" if partial[i, j].item() else " "
                                  for j in range(min(full.shape[1], grid_size[1])))
                    lines.append(row)
        return "\n".join(lines)

    def __str__(self):
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n{self.to_string()}\n)")

    def __repr__(self):
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, mask_mod={self._mod_name()})"

    def _mod_name(self):
        return getattr(self.mask_mod, "__name__", repr(self.mask_mod))

    def __getitem__(self, index):
        """The mask of some batches and heads: block_mask[b], block_mask[b, h], with slices."""
        index = index if isinstance(index, tuple) else (index,)
        dense = self._dense
        for dim, i in enumerate(index):
            dense = dense.narrow(dim, i, 1) if isinstance(i, int) else dense[(slice(None),) * dim + (i,)]
        return BlockMask(self.mask_mod, dense.contiguous(), self.BLOCK_SIZE)


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device="cuda"):
    """mod_fn (a mask_mod) over the grid as a dense bool tensor [B, H, Q_LEN, KV_LEN] (B or H None: 1)."""
    return _dense_mask(mod_fn, B or 1, H or 1, Q_LEN, KV_LEN, _C.device(device) if isinstance(device, str) else
                       device)


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda", BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile=False):
    """The BlockMask of mask_mod(b, h, q_idx, kv_idx) -> bool over B batches and H heads (None: the same for
    all, broadcast) of Q_LEN queries and KV_LEN keys, in tiles of BLOCK_SIZE (an int, or (q, kv))."""
    if not callable(mask_mod):
        raise TypeError(f"create_block_mask: mask_mod must be callable, got {type(mask_mod).__name__}")
    for name, n in (("Q_LEN", Q_LEN), ("KV_LEN", KV_LEN)):
        if not isinstance(n, int) or n <= 0:
            raise ValueError(f"create_block_mask: {name} must be a positive int, got {n!r}")
    block = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    if len(block) != 2 or any(not isinstance(s, int) or s <= 0 for s in block):
        raise ValueError(f"create_block_mask: BLOCK_SIZE must be a positive int or a pair of them, got {BLOCK_SIZE}")
    device = _C.device(device) if isinstance(device, str) else device
    if device.type == "cuda" and not _cuda_available():
        device = _C.device("cpu")  # (PyTorch's default device is "cuda"; on a machine without one, the CPU)
    dense = _dense_mask(mask_mod, B or 1, H or 1, Q_LEN, KV_LEN, device)
    return BlockMask(mask_mod, dense, block)


def _cuda_available():
    from trainrun import cuda
    return cuda.is_available()


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None):
    """Attention of query [B, Hq, L, E] over key [B, Hkv, S, E] and value [B, Hkv, S, Ev]: the scores
    (q . k * scale, scale 1/sqrt(E) by default) go through score_mod(score, b, h, q_idx, kv_idx), the positions
    block_mask's mask_mod hides are left out, and the softmax weighs the values. Returns [B, Hq, L, Ev] (and the
    log-sum-exp of the scores, [B, Hq, L], with return_lse=True). enable_gqa: Hq a multiple of Hkv, each group
    of query heads sharing one key/value head."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not _C._is_cpp_tensor(t) or t.dim() != 4:
            raise ValueError(f"flex_attention: {name} must be a 4-D tensor [B, H, seq, dim], got "
                             f"{list(t.shape) if _C._is_cpp_tensor(t) else type(t).__name__}")
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(f"flex_attention: query, key and value must have one dtype, got {query.dtype}, "
                         f"{key.dtype} and {value.dtype}")
    if kernel_options is not None and not isinstance(kernel_options, dict):
        raise TypeError("flex_attention: kernel_options must be a dict (its tuning knobs do not change results)")
    B, Hq, L, E = query.shape
    Bk, Hkv, S, Ek = key.shape
    if tuple(value.shape[:3]) != (Bk, Hkv, S):
        raise ValueError(f"flex_attention: key {list(key.shape)} and value {list(value.shape)} must agree in batch, "
                         "heads and length")
    if Ek != E:
        raise ValueError(f"flex_attention: query and key must have the same embedding dim, got {E} and {Ek}")
    if Bk != B and Bk != 1:
        raise ValueError(f"flex_attention: key's batch {Bk} must equal query's {B} (or be 1)")
    if Hq != Hkv:
        if not enable_gqa:
            raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={Hq} and "
                             f"Hkv={Hkv}. Try setting enable_gqa=True for GQA.")
        if Hq % Hkv:
            raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got Hq={Hq} "
                             f"and Hkv={Hkv}.")
        key = key.repeat_interleave(Hq // Hkv, dim=1)
        value = value.repeat_interleave(Hq // Hkv, dim=1)
    if block_mask is not None:
        if not isinstance(block_mask, BlockMask):
            raise TypeError(f"flex_attention: block_mask must be a BlockMask (create_block_mask), got "
                            f"{type(block_mask).__name__}")
        if block_mask.seq_lengths != (L, S):
            raise ValueError(f"flex_attention: block_mask was made for (Q_LEN, KV_LEN) = {block_mask.seq_lengths}, "
                             f"but query and key have lengths ({L}, {S})")
        mB, mH = block_mask.shape[:2]
        if mB not in (1, B) or mH not in (1, Hq):
            raise ValueError(f"flex_attention: block_mask's (B, H) = ({mB}, {mH}) does not broadcast to "
                             f"({B}, {Hq})")
    low_precision = query.dtype in (_C.dtype.float16, _C.dtype.bfloat16)
    q, k, v = (t.float() for t in (query, key, value)) if low_precision else (query, key, value)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    scores = trainrun.matmul(q, k.transpose(-2, -1)) * scale
    if score_mod is not None:
        b, h, q_idx, kv_idx = _index_grid(B, Hq, L, S, query.device)
        scores = score_mod(scores, b, h, q_idx, kv_idx)
        if tuple(scores.shape) != (B, Hq, L, S):
            scores = scores.expand([B, Hq, L, S])
    if block_mask is not None:
        keep = block_mask._dense.to(query.device)
        scores = scores.masked_fill(keep.logical_not(), -math.inf)
    # A softmax that gives a row with nothing kept zeros (not NaN), and its log-sum-exp.
    row_max = scores.amax(dim=-1, keepdim=True)
    finite_max = trainrun.where(row_max.isinf() & (row_max < 0), trainrun.zeros_like(row_max), row_max).detach()
    weights = (scores - finite_max).exp()
    total = weights.sum(dim=-1, keepdim=True)
    probabilities = weights / trainrun.where(total == 0, trainrun.ones_like(total), total)
    out = trainrun.matmul(probabilities, v)
    if low_precision:
        out = out.to(query.dtype)
    if return_lse:
        lse = (total.log() + finite_max).squeeze(-1)
        return out, lse
    return out
