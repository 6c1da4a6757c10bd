"""torch.nn.attention.flex_attention: score_mod and mask_mod functions over broadcast index tensors, checked
against scaled_dot_product_attention and against the scores written out by hand (values and gradients, also
of a tensor a score_mod reads), BlockMask's tiles, fully masked rows, GQA, low precision and compile."""
import math

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun.nn.attention.flex_attention import (BlockMask, and_masks, create_block_mask, create_mask,  # noqa: E402
                                                  flex_attention, noop_mask, or_masks)

B, H, L, E = 2, 4, 10, 8


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def qkv(requires_grad=False):
    torch.manual_seed(0)
    return [torch.randn(B, H, L, E, requires_grad=requires_grad) for _ in range(3)]


def test_without_mods_and_with_a_causal_block_mask_it_is_sdpa():
    q, k, v = qkv()
    assert torch.allclose(flex_attention(q, k, v), F.scaled_dot_product_attention(q, k, v), atol=1e-5)
    mask = create_block_mask(causal, B=None, H=None, Q_LEN=L, KV_LEN=L, device="cpu")
    assert torch.allclose(flex_attention(q, k, v, block_mask=mask),
                          F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5)
    assert torch.allclose(flex_attention(q, k, v, scale=0.3), F.scaled_dot_product_attention(q, k, v, scale=0.3),
                          atol=1e-5)


def test_a_score_mod_reading_a_tensor_gives_its_gradient():
    q, k, v = qkv(requires_grad=True)
    bias = torch.randn(H, requires_grad=True)

    def relative_bias(score, b, h, q_idx, kv_idx):
        return score + bias[h] * (q_idx - kv_idx)

    out = flex_attention(q, k, v, score_mod=relative_bias)
    distance = (torch.arange(L).view(L, 1) - torch.arange(L).view(1, L)).float()
    scores = q @ k.transpose(-1, -2) / math.sqrt(E) + bias.view(1, H, 1, 1) * distance
    expected = scores.softmax(-1) @ v
    assert torch.allclose(out, expected, atol=1e-5)
    grads = torch.autograd.grad(out.sum(), [q, bias])
    expected_grads = torch.autograd.grad(expected.sum(), [q, bias])
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(grads, expected_grads))


def test_combined_masks_per_batch_and_head_and_their_tiles():
    q, k, v = qkv()
    document = torch.tensor([0] * 4 + [1] * 6)

    def same_document(b, h, q_idx, kv_idx):
        return document[q_idx] == document[kv_idx]

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= 2

    mask_mod = and_masks(causal, same_document, window)
    dense = create_mask(mask_mod, 1, 1, L, L, device="cpu")
    assert dense.shape == (1, 1, L, L) and dense.dtype == torch.bool and dense.sum().item() == 24
    out = flex_attention(q, k, v, block_mask=create_block_mask(mask_mod, None, None, L, L, device="cpu"))
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=dense), atol=1e-5)
    # A mask that differs per batch and head.
    per = create_block_mask(lambda b, h, q_idx, kv_idx: (kv_idx <= q_idx + b) & (h % 2 == 0) | (q_idx == kv_idx),
                            B, H, L, L, device="cpu")
    assert per.shape == (B, H, L, L) and per[1].shape == (1, H, L, L) and per[1, 2].shape == (1, 1, L, L)
    out = flex_attention(q, k, v, block_mask=per)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=per._dense), atol=1e-5)
    # Tiles of 4: a causal 10 x 10 mask has full tiles below the diagonal, partial ones on it.
    tiles = create_block_mask(causal, None, None, L, L, device="cpu", BLOCK_SIZE=4)
    assert tiles.to_dense()[0, 0].tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert tiles.kv_num_blocks.tolist() == [[[1, 1, 1]]] and tiles.full_kv_num_blocks.tolist() == [[[0, 1, 2]]]
    assert tiles.kv_indices[0, 0, 2, 0].item() == 2 and tiles.full_kv_indices[0, 0, 2, :2].tolist() == [0, 1]
    assert tiles.sparsity() == pytest.approx(100 / 3)
    assert "BlockMask(shape=(1, 1, 10, 10)" in repr(tiles) and "█" in tiles.to_string()
    # or_masks / noop_mask.
    either = or_masks(causal, window)
    assert either(*[torch.tensor(0)] * 2, torch.tensor(0), torch.tensor(3)).item() is False
    assert create_mask(noop_mask, 1, 1, 3, 3, device="cpu").all().item()


def test_a_row_with_nothing_kept_gives_zeros_and_a_lse_of_minus_infinity():
    q, k, v = qkv()
    nothing = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx < 0, None, None, L, L, device="cpu")
    out, lse = flex_attention(q, k, v, block_mask=nothing, return_lse=True)
    assert out.abs().sum().item() == 0 and lse.shape == (B, H, L) and math.isinf(lse[0, 0, 0].item())
    _, lse = flex_attention(q, k, v, return_lse=True)
    scores = q @ k.transpose(-1, -2) / math.sqrt(E)
    assert torch.allclose(lse, scores.logsumexp(-1), atol=1e-5)


def test_gqa_low_precision_compile_and_errors():
    q, k, v = qkv()
    k2, v2 = k[:, :2].contiguous(), v[:, :2].contiguous()
    assert torch.allclose(flex_attention(q, k2, v2, enable_gqa=True),
                          F.scaled_dot_product_attention(q, k2, v2, enable_gqa=True), atol=1e-5)
    with pytest.raises(ValueError, match="Hq=4 and Hkv=2. Try setting enable_gqa=True"):
        flex_attention(q, k2, v2)
    with pytest.raises(ValueError, match="multiple of kv heads"):
        flex_attention(q, k[:, :3], v[:, :3], enable_gqa=True)
    mask = create_block_mask(causal, None, None, L, L, device="cpu")
    low = flex_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), block_mask=mask)
    assert low.dtype == torch.bfloat16
    assert torch.allclose(low.float(), flex_attention(q, k, v, block_mask=mask), atol=3e-2)
    compiled = torch.compile(flex_attention)
    assert torch.allclose(compiled(q, k, v, block_mask=mask), flex_attention(q, k, v, block_mask=mask), atol=1e-6)
    with pytest.raises(ValueError, match="block_mask was made for \\(Q_LEN, KV_LEN\\) = \\(10, 10\\)"):
        flex_attention(q[:, :, :5], k, v, block_mask=mask)
    with pytest.raises(ValueError, match="query must be a 4-D tensor"):
        flex_attention(q[0], k, v)
    with pytest.raises(TypeError, match="mask_mod must be callable"):
        create_block_mask(None, None, None, L, L)
    assert isinstance(mask, BlockMask)


def test_an_all_false_bool_tensor_prints():
    assert repr(torch.tensor([False])) == "tensor([False])"
    assert repr(torch.tensor(False)) == "tensor(False)"
