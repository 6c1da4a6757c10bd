"""What PyTorch's own example scripts (pytorch/examples: word_language_model, the distributed recipes) reach for
beyond the everyday API, each checked as those scripts use it: a whole model saved with torch.save and loaded
with weights_only under torch.serialization.safe_globals (a Transformer's layers included), the legacy
torch.Tensor(...) constructor, a 0-dim tensor where a number is expected (input.fill_(word_idx)),
RNN.flatten_parameters(), and `import torch.onnx`."""
import io
import pickle

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun import nn  # noqa: E402


class _TinyLM(nn.Transformer):
    """As word_language_model's TransformerModel: an nn.Transformer subclass, its decoder dropped."""

    def __init__(self):
        super().__init__(d_model=8, nhead=2, dim_feedforward=8, num_encoder_layers=1)
        self.input_emb = nn.Embedding(20, 8)
        self.decoder = nn.Linear(8, 20)

    def forward(self, src):
        return self.decoder(self.encoder(self.input_emb(src)))


def test_a_whole_transformer_model_loads_under_safe_globals(tmp_path):
    import trainrun.distributed.tensor  # noqa: F401  (which wraps nn.functional.relu: the original is allowed too)
    torch.manual_seed(0)
    model = _TinyLM().eval()
    path = str(tmp_path / "model.pt")
    with open(path, "wb") as f:
        torch.save(model, f)
    with pytest.raises(pickle.UnpicklingError, match="add_safe_globals"):
        torch.load(path)  # weights_only by default: the classes must be allowed
    allowed = [_TinyLM, nn.modules.activation.MultiheadAttention, nn.modules.container.ModuleList,
               nn.modules.dropout.Dropout, nn.modules.linear.Linear, nn.modules.linear.NonDynamicallyQuantizableLinear,
               nn.modules.normalization.LayerNorm, nn.modules.sparse.Embedding,
               nn.modules.transformer.TransformerEncoder, nn.modules.transformer.TransformerEncoderLayer,
               nn.functional.relu]
    with open(path, "rb") as f, torch.serialization.safe_globals(allowed):
        loaded = torch.load(f)
    assert type(loaded) is _TinyLM
    x = torch.randint(0, 20, (5, 2))
    assert torch.equal(loaded(x), model(x))
    # nn.Transformer's layers use nn.Dropout itself (one class per name), so pickle finds it by its name
    assert type(model.encoder.layers[0].dropout) is nn.Dropout


def test_a_protocol_2_pickle_of_builtins_loads_with_weights_only():
    buffer = io.BytesIO()
    torch.save({"names": {"a", "b"}, "w": torch.ones(2)}, buffer)  # (protocol 2: writes __builtin__.set)
    buffer.seek(0)
    assert torch.load(buffer)["names"] == {"a", "b"}


def test_legacy_tensor_constructor():
    assert torch.Tensor(2, 3).shape == (2, 3) and torch.Tensor(2, 3).dtype == torch.get_default_dtype()
    assert torch.Tensor([1, 2]).tolist() == [1.0, 2.0] and torch.Tensor((2, 3)).tolist() == [2.0, 3.0]
    assert torch.Tensor(torch.Size([4])).shape == (4,) and torch.Tensor().shape == (0,)
    assert torch.Tensor([[torch.tensor(3)]]).tolist() == [[3.0]]
    weight = nn.Parameter(torch.Tensor(3, 2))  # the old way to declare a custom layer's weight
    nn.init.zeros_(weight)
    assert isinstance(weight, nn.Parameter) and weight.shape == (3, 2) and weight.sum().item() == 0


def test_a_0_dim_tensor_is_a_number_where_one_is_expected():
    x = torch.zeros(3, dtype=torch.long)
    x.fill_(torch.tensor(7))
    assert x.tolist() == [7, 7, 7]
    assert torch.full((2,), torch.tensor(2.5)).tolist() == [2.5, 2.5]
    assert torch.add(torch.ones(2), torch.ones(2), alpha=torch.tensor(3)).tolist() == [4.0, 4.0]
    assert ["a", "b", "c"][torch.tensor(2)] == "c"
    with pytest.raises(TypeError, match="0-dim tensor, got a tensor with 1 dimensions"):
        x.fill_(torch.tensor([1, 2]))


def test_rnn_flatten_parameters_and_onnx_names():
    lstm = nn.LSTM(4, 3, 2)
    assert lstm.flatten_parameters() is None
    out, _ = lstm(torch.randn(5, 1, 4))
    assert out.shape == (5, 1, 3)
    import trainrun.onnx
    assert not torch.onnx.is_in_onnx_export()
    with pytest.raises(torch.onnx.OnnxExporterError, match="trainrun.export.export"):
        torch.onnx.export(lstm, (torch.randn(5, 1, 4),), "lstm.onnx")
    assert trainrun.onnx.TrainingMode.EVAL == 0
