"""torch.nn.attention.bias: causal masks for queries and keys of different lengths, passed to
scaled_dot_product_attention as attn_mask.

    mask = causal_lower_right(seq_len_q, seq_len_kv)      # the last query sees every key (decoding with a cache)
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

UPPER_LEFT aligns the triangle to the top-left corner (query i sees keys 0..i, what is_causal=True means);
LOWER_RIGHT to the bottom-right (query i sees keys 0..i + seq_len_kv - seq_len_q)."""
from enum import IntEnum

import trainrun

__all__ = ["CausalBias", "CausalVariant", "causal_lower_right", "causal_upper_left"]


class CausalVariant(IntEnum):
    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal mask described by its variant and sizes, materialized (a bool mask, True = attend) when used."""

    def __init__(self, variant, seq_len_q, seq_len_kv):
        if not isinstance(variant, CausalVariant):
            raise TypeError(f"CausalBias: variant must be a CausalVariant, got {variant!r}")
        self.variant, self.seq_len_q, self.seq_len_kv = variant, int(seq_len_q), int(seq_len_kv)

    def _upper_left(self, device):
        return trainrun.ones(self.seq_len_q, self.seq_len_kv, dtype=trainrun.bool, device=device).tril()

    def _lower_right(self, device):
        diagonal = self.seq_len_kv - self.seq_len_q
        return trainrun.ones(self.seq_len_q, self.seq_len_kv, dtype=trainrun.bool, device=device).tril(diagonal)

    def _materialize(self, device=None):
        return self._upper_left(device) if self.variant == CausalVariant.UPPER_LEFT else self._lower_right(device)

    @property
    def shape(self):
        return trainrun.Size([self.seq_len_q, self.seq_len_kv])

    def __repr__(self):
        return repr(self._materialize())


def _sizes(size):
    if len(size) != 2:
        raise ValueError(f"causal mask: give (seq_len_q, seq_len_kv), got {len(size)} sizes")
    return size


def causal_upper_left(*size):
    """The top-left aligned causal mask of (seq_len_q, seq_len_kv)."""
    return CausalBias(CausalVariant.UPPER_LEFT, *_sizes(size))


def causal_lower_right(*size):
    """The bottom-right aligned causal mask of (seq_len_q, seq_len_kv)."""
    return CausalBias(CausalVariant.LOWER_RIGHT, *_sizes(size))
