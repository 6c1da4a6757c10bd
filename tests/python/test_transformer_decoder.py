"""nn.Transformer, TransformerDecoder(Layer) against PyTorch 1.13: the same
parameter names (so state dicts load across), the same outputs and input
gradients for post-norm and pre-norm, sequence-first and batch-first."""
import numpy as np
import pytest

from built_tree import needs_torch, torch  # trainrun from the source tree; skips when not built

import trainrun  # noqa: E402


@needs_torch
@pytest.mark.parametrize("batch_first,norm_first", [(False, False), (True, True)])
def test_transformer_matches_pytorch(batch_first, norm_first):
    options = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
                   batch_first=batch_first, norm_first=norm_first)
    theirs, ours = torch.nn.Transformer(**options), trainrun.nn.Transformer(**options)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    result = ours.load_state_dict({k: trainrun.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    assert not result.missing_keys and not result.unexpected_keys
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((5, 3, 8)).astype(np.float32), rng.standard_normal((4, 3, 8)).astype(np.float32)
    if batch_first:
        src, tgt = src.transpose(1, 0, 2).copy(), tgt.transpose(1, 0, 2).copy()
    outputs = []
    for lib, model in ((torch, theirs), (trainrun, ours)):
        s, t = lib.tensor(src, requires_grad=True), lib.tensor(tgt, requires_grad=True)
        mask = type(model).generate_square_subsequent_mask(4)
        out = model(s, t, tgt_mask=mask)
        out.pow(2).sum().backward()
        outputs.append((out.detach().numpy(), s.grad.numpy(), t.grad.numpy(), mask.numpy()))
    for a, b in zip(*outputs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_decoder_refuses_mismatched_batches():
    model = trainrun.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                    dim_feedforward=8)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        model(trainrun.zeros(5, 2, 8), trainrun.zeros(4, 3, 8))
    layer = trainrun.nn.TransformerDecoderLayer(8, 2, dim_feedforward=8, batch_first=True)
    assert layer(trainrun.zeros(2, 4, 8), trainrun.zeros(2, 5, 8)).shape == (2, 4, 8)
