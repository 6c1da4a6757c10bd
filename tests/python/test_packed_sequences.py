"""nn.utils.rnn.pack_padded_sequence / pack_sequence / pad_packed_sequence and the recurrent layers on a
PackedSequence, against PyTorch 1.13: the packed data and batch sizes, the outputs, h_n (and c_n) and the input
gradients of 2-layer bidirectional RNN, LSTM and GRU over unsorted lengths, with and without an initial state."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
from trainrun.nn.utils import rnn  # noqa: E402


def _np(t):
    return np.array(t.detach().tolist(), dtype=float)


@needs_torch
@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("with_state", [False, True])
def test_recurrent_layers_on_packed_sequences_match_pytorch(mode, with_state):
    peer.manual_seed(0)
    theirs = getattr(peer.nn, mode)(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    ours = getattr(torch.nn, mode)(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    ours.load_state_dict({k: torch.tensor(v.tolist()) for k, v in theirs.state_dict().items()})
    x = peer.randn(3, 5, 3)
    lengths = [2, 5, 3]
    x_theirs, x_ours = x.clone().requires_grad_(), torch.tensor(x.tolist(), requires_grad=True)
    packed_theirs = peer.nn.utils.rnn.pack_padded_sequence(x_theirs, lengths, batch_first=True, enforce_sorted=False)
    packed_ours = rnn.pack_padded_sequence(x_ours, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    np.testing.assert_allclose(_np(packed_ours.data), _np(packed_theirs.data))
    assert packed_ours.batch_sizes.tolist() == packed_theirs.batch_sizes.tolist()
    assert packed_ours.sorted_indices.tolist() == packed_theirs.sorted_indices.tolist()
    state_theirs = state_ours = None
    if with_state:
        h0 = peer.randn(4, 3, 4)
        state_theirs = (h0, peer.randn(4, 3, 4)) if mode == "LSTM" else h0
        state_ours = (torch.tensor(h0.tolist()), torch.tensor(state_theirs[1].tolist())) if mode == "LSTM" else \
            torch.tensor(h0.tolist())
    out_theirs, hidden_theirs = theirs(packed_theirs, state_theirs)
    out_ours, hidden_ours = ours(packed_ours, state_ours)
    padded_theirs, lengths_theirs = peer.nn.utils.rnn.pad_packed_sequence(out_theirs, batch_first=True)
    padded_ours, lengths_ours = rnn.pad_packed_sequence(out_ours, batch_first=True)
    assert lengths_ours.tolist() == lengths_theirs.tolist() == lengths
    np.testing.assert_allclose(_np(padded_ours), _np(padded_theirs), atol=1e-5)
    hiddens_theirs = hidden_theirs if mode == "LSTM" else (hidden_theirs,)
    hiddens_ours = hidden_ours if mode == "LSTM" else (hidden_ours,)
    for a, b in zip(hiddens_ours, hiddens_theirs):
        np.testing.assert_allclose(_np(a), _np(b), atol=1e-5)
    (padded_theirs.pow(2).sum() + hiddens_theirs[0].sum()).backward()
    (padded_ours.pow(2).sum() + hiddens_ours[0].sum()).backward()
    np.testing.assert_allclose(_np(x_ours.grad), _np(x_theirs.grad), atol=1e-5)


@needs_torch
def test_pack_sequence_and_padding_match_pytorch():
    seqs = [peer.randn(4, 2), peer.randn(2, 2), peer.randn(1, 2)]
    ours = rnn.pack_sequence([torch.tensor(s.tolist()) for s in seqs])
    theirs = peer.nn.utils.rnn.pack_sequence(seqs)
    assert ours.batch_sizes.tolist() == theirs.batch_sizes.tolist() and ours.sorted_indices is None
    padded_ours, _ = rnn.pad_packed_sequence(ours, padding_value=-1.0, total_length=6)
    padded_theirs, _ = peer.nn.utils.rnn.pad_packed_sequence(theirs, padding_value=-1.0, total_length=6)
    np.testing.assert_allclose(_np(padded_ours), _np(padded_theirs))
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        rnn.pack_padded_sequence(torch.ones(3, 2, 1), [1, 3])
    with pytest.raises(ValueError, match="total_length"):
        rnn.pad_packed_sequence(ours, total_length=2)
