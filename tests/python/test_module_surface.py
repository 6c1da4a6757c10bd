"""Modules as PyTorch shows them: optional parameters a layer was built without read None (Linear(bias=False).bias,
LayerNorm(elementwise_affine=False).weight, BatchNorm(track_running_stats=False).running_mean); print(model) as
PyTorch's for the layers whose options live in C++ (against PyTorch 1.13, and 2.6's quoting where they differ);
LayerNorm(bias=False) and TransformerEncoderLayer(bias=False); ParameterList items are Parameters; a deep copy
of a layer with a Python forward computes with the copy's weights; state_dict and load_state_dict hooks."""
import copy

import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402


@pytest.mark.parametrize("build, absent", [
    (lambda: nn.Linear(2, 3, bias=False), ["bias"]),
    (lambda: nn.Conv2d(1, 2, 3, bias=False), ["bias"]),
    (lambda: nn.LayerNorm(3, elementwise_affine=False), ["weight", "bias"]),
    (lambda: nn.LayerNorm(3, bias=False), ["bias"]),
    (lambda: nn.BatchNorm1d(3, affine=False), ["weight", "bias"]),
    (lambda: nn.BatchNorm2d(3, track_running_stats=False), ["running_mean", "running_var", "num_batches_tracked"]),
    (lambda: nn.GroupNorm(1, 3, affine=False), ["weight", "bias"]),
    (lambda: nn.InstanceNorm1d(3), ["weight", "bias", "running_mean", "running_var"]),
])
def test_optional_parameters_a_layer_lacks_read_none(build, absent):
    module = build()
    for name in absent:
        assert getattr(module, name) is None, name
        assert name not in module.state_dict()
    assert all(name not in absent for name, _ in module.named_parameters())
    copied = copy.deepcopy(module)
    assert all(getattr(copied, name) is None for name in absent)


def test_layer_norm_without_bias_and_transformer_layers_without_biases():
    torch.manual_seed(0)
    norm = nn.LayerNorm(4, bias=False)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5, -1.0]))
    x = torch.randn(3, 4, requires_grad=True)
    norm(x).sum().backward()
    y = x.detach().clone().requires_grad_()
    F.layer_norm(y, (4,), norm.weight.detach()).sum().backward()
    assert torch.allclose(norm(x), F.layer_norm(x, (4,), norm.weight), atol=1e-6)
    assert torch.allclose(x.grad, y.grad, atol=1e-6) and norm.weight.grad is not None
    assert list(norm.state_dict()) == ["weight"]

    layer = nn.TransformerEncoderLayer(8, 2, 16, bias=False, batch_first=True)
    assert all("bias" not in name for name, _ in layer.named_parameters())
    # PyTorch's order of children (and so of named_parameters and state_dict keys)
    assert [name for name, _ in layer.named_children()] == ["self_attn", "linear1", "dropout", "linear2", "norm1",
                                                             "norm2", "dropout1", "dropout2"]
    assert layer(torch.randn(2, 5, 8)).shape == (2, 5, 8)
    decoder = nn.TransformerDecoderLayer(8, 2, 16, bias=False, batch_first=True)
    assert all("bias" not in name for name, _ in decoder.named_parameters())
    assert decoder(torch.randn(2, 5, 8), torch.randn(2, 3, 8)).shape == (2, 5, 8)


@needs_torch
def test_transformer_layer_parameters_in_pytorchs_order():
    ours = [name for name, _ in nn.TransformerEncoderLayer(8, 2, 16).named_parameters()]
    theirs = [name for name, _ in peer.nn.TransformerEncoderLayer(8, 2, 16).named_parameters()]
    assert ours == theirs
    ours = list(nn.TransformerDecoderLayer(8, 2, 16).state_dict())
    theirs = list(peer.nn.TransformerDecoderLayer(8, 2, 16).state_dict())
    assert ours == theirs


REPRS = ["nn.Linear(2, 3, bias=False)", "nn.Conv2d(1, 2, 3, stride=2, padding=1, dilation=2, groups=1, bias=False)",
         "nn.Conv2d(2, 2, 3, padding_mode='reflect', padding=1, groups=2)", "nn.LayerNorm(3)",
         "nn.LayerNorm((3, 4), eps=1e-6, elementwise_affine=False)", "nn.BatchNorm1d(3)",
         "nn.BatchNorm2d(3, affine=False, momentum=0.2)", "nn.BatchNorm3d(2)", "nn.GroupNorm(1, 3)",
         "nn.Embedding(5, 2, padding_idx=0)", "nn.Embedding(5, 2, max_norm=1.0)", "nn.Flatten()", "nn.Flatten(0, 2)",
         "nn.MaxPool2d(2)", "nn.MaxPool2d(3, stride=2, padding=1)", "nn.AvgPool2d(2)",
         "nn.AdaptiveAvgPool2d((1, 1))", "nn.AdaptiveMaxPool2d(1)", "nn.Conv1d(1, 2, 3)",
         "nn.ConvTranspose2d(2, 3, 2, stride=2)", "nn.Conv3d(1, 2, 3, padding=1)", "nn.PixelShuffle(2)",
         "nn.PReLU()", "nn.Unflatten(1, (2, 2))", "nn.ZeroPad2d(1)", "nn.ReflectionPad2d((1, 0, 2, 0))",
         "nn.ConstantPad1d(2, 3.5)", "nn.MultiheadAttention(8, 2)", "nn.TransformerEncoderLayer(8, 2, 16)",
         "nn.ParameterList([nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(3, 2))])",
         "nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten())"]


@needs_torch
@pytest.mark.parametrize("expression", REPRS)
def test_print_model_shows_what_pytorch_shows(expression):
    ours = repr(eval(expression, {"nn": nn, "torch": torch}))
    theirs = repr(eval(expression, {"nn": peer.nn, "torch": peer}))
    assert ours.replace("trainrun.", "torch.") == theirs


def test_print_model_quotes_strings_as_pytorch_2_6():
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.EmbeddingBag(5, 2)) == "EmbeddingBag(5, 2, mode='mean')"


def test_parameter_containers_hold_parameters():
    plist = nn.ParameterList([nn.Parameter(torch.ones(2))])
    pdict = nn.ParameterDict({"a": nn.Parameter(torch.ones(2))})
    assert isinstance(plist[0], nn.Parameter) and isinstance(pdict["a"], nn.Parameter)
    assert all(isinstance(p, nn.Parameter) for p in plist)


def test_parameters_and_buffers_read_as_attributes_are_the_objects_handed_out():
    """module.weight is the Parameter handed out before while it lives (one object, as PyTorch's), a tensor
    registered under two names reads under both, and a parameter put in place of another reads as the new one."""
    lin = nn.Linear(3, 2)
    held = lin.weight
    assert lin.weight is held and next(lin.parameters()) is held and isinstance(held, nn.Parameter)
    bn = nn.BatchNorm1d(2)
    mean = bn.running_mean
    assert bn.running_mean is mean and not isinstance(mean, nn.Parameter)

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.ones(2))
            self.b = self.a

    tied = Tied()
    assert tied.b is tied.a and [n for n, _ in tied.named_parameters()] == ["a"]
    new = nn.Parameter(torch.zeros(2, 3))
    lin.weight = new
    assert lin.weight is new and torch.equal(lin(torch.ones(1, 3)), lin.bias.detach().view(1, 2))
    with pytest.raises(AttributeError, match="no attribute"):
        lin.nothing_here


def test_deep_copy_of_a_layer_with_a_python_forward_uses_the_copys_weights():
    embedding = nn.Embedding(5, 2, padding_idx=0)
    copied = copy.deepcopy(embedding)
    with torch.no_grad():
        copied.weight.fill_(1.0)
    assert copied(torch.tensor([1])).tolist() == [[1.0, 1.0]]
    assert not np.allclose(embedding(torch.tensor([1])).tolist(), [[1.0, 1.0]])
    norm = copy.deepcopy(nn.LayerNorm(2, bias=False))
    with torch.no_grad():
        norm.weight.fill_(2.0)
    assert torch.allclose(norm(torch.tensor([[1.0, -1.0]])), torch.tensor([[2.0, -2.0]]), atol=1e-4)


def test_state_dict_hooks_rename_keys_and_see_prefixes():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    calls = []
    model[0].register_state_dict_pre_hook(lambda module, prefix, keep_vars: calls.append(("pre", prefix)))
    handle = model.register_state_dict_post_hook(lambda module, sd, prefix, meta: calls.append(("post", len(sd))))
    model[1]._register_state_dict_hook(lambda module, sd, prefix, meta: calls.append(("child post", prefix)))
    state = model.state_dict()
    assert calls == [("pre", "0."), ("child post", "1."), ("post", 4)]  # children's post hooks first
    handle.remove()
    model.state_dict()
    assert calls[-1] == ("child post", "1.")
    layer = nn.Linear(1, 1)
    layer.register_state_dict_post_hook(lambda module, sd, prefix, meta: {})
    with pytest.raises(RuntimeError, match="post-hook must return None"):
        layer.state_dict()

    def renamed(state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        if prefix + "w" in state_dict:  # an old checkpoint's name
            state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")
    model[1]._register_load_state_dict_pre_hook(renamed)
    old = dict(state)
    old["1.w"] = old.pop("1.weight")
    assert not model.load_state_dict(old).missing_keys and "1.w" in old  # the caller's dict is left as it was
    old["extra"] = torch.ones(1)
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra"'):
        model.load_state_dict(old)
    model.register_load_state_dict_post_hook(lambda module, keys: keys.unexpected_keys.clear())
    assert model.load_state_dict(old).unexpected_keys == []  # the post hook forgave it
    assert model.state_dict(keep_vars=True)["0.weight"].requires_grad
    assert model.state_dict(keep_vars=True)["0.weight"] is model[0].weight


def test_pytorchs_module_files_and_their_private_bases():
    from trainrun.nn.modules.batchnorm import _BatchNorm, _NormBase
    from trainrun.nn.modules.conv import _ConvNd
    import trainrun.nn.modules.linear as linear
    assert nn.modules.module.Module is nn.Module and linear.Linear is nn.Linear and nn.modules.Conv2d is nn.Conv2d
    assert isinstance(nn.BatchNorm2d(3), _BatchNorm) and isinstance(nn.SyncBatchNorm(3), _BatchNorm)
    assert isinstance(nn.InstanceNorm1d(3), _NormBase) and not isinstance(nn.LayerNorm(3), _BatchNorm)
    assert all(issubclass(c, _ConvNd) for c in (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d))
    assert isinstance(nn.Dropout(), nn.modules.dropout._DropoutNd) and isinstance(nn.MSELoss(), nn.modules.loss._Loss)
    # the weight-decay split scripts write
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.LazyLinear(3))
    norms = [m for m in model.modules() if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm))]
    assert norms == [model[1]]
    model.set_submodule("2", nn.Identity())
    assert isinstance(model[2], nn.Identity)
    with pytest.raises(AttributeError):
        model.set_submodule("9", nn.Identity(), strict=True)


def test_load_whole_objects_only_when_asked(tmp_path):
    import dataclasses
    path = str(tmp_path / "model.pt")
    torch.save(nn.Linear(2, 3), path)
    with pytest.raises(Exception, match="weights_only=False"):
        torch.load(path)
    loaded = torch.load(path, weights_only=False)
    assert isinstance(loaded, nn.Linear) and loaded.weight.shape == (3, 2)
    torch.save({"config": Config(0.5), "w": torch.ones(2)}, path)
    with pytest.raises(Exception, match="add_safe_globals"):
        torch.load(path)
    with torch.serialization.safe_globals([Config]):
        assert torch.load(path, mmap=True)["config"] == Config(0.5)
    torch.serialization.add_safe_globals([Config])
    try:
        assert Config in torch.serialization.get_safe_globals() and torch.load(path)["config"].lr == 0.5
    finally:
        torch.serialization.clear_safe_globals()
    assert dataclasses.is_dataclass(Config)


@__import__("dataclasses").dataclass
class Config:
    lr: float = 0.1


def test_module_load_is_pytorchs_default():
    import trainrun
    weight = trainrun.nn.Parameter(trainrun.zeros(2))
    loaded = weight.module_load(trainrun.ones(2))
    assert loaded.tolist() == [1.0, 1.0] and weight.tolist() == [1.0, 1.0] and not loaded.requires_grad
    other = trainrun.full((2,), 3.0)
    assigned = weight.module_load(other, assign=True)
    assert assigned.tolist() == [3.0, 3.0] and weight.tolist() == [1.0, 1.0]


def test_losses_and_activations_take_their_inputs_by_keyword():
    """PyTorch's forward names: criterion(input=..., target=...), CTCLoss(log_probs=, targets=, ...),
    PoissonNLLLoss(log_input=, target=); ConstantPad1d(padding=, value=)."""
    import inspect
    x, y = torch.tensor([0.5, -1.0]), torch.tensor([0.0, 1.0])
    assert torch.equal(nn.MSELoss()(input=x, target=y), nn.MSELoss()(x, y))
    assert torch.equal(nn.ReLU()(input=x), nn.ReLU()(x))
    assert torch.equal(nn.PoissonNLLLoss()(log_input=x, target=y), nn.PoissonNLLLoss()(x, y))
    assert list(inspect.signature(nn.CTCLoss.forward).parameters) == ["self", "log_probs", "targets", "input_lengths",
                                                                      "target_lengths"]
    with pytest.raises(TypeError, match="MSELoss.forward\\(\\): missing a required argument: 'target'"):
        nn.MSELoss()(x)
    pad = nn.ConstantPad1d(padding=1, value=2.5)
    assert pad(torch.zeros(1, 1)).tolist() == [[2.5, 0.0, 2.5]]


def test_regression_losses_take_pytorch_26s_weight():
    """F.mse_loss / l1_loss / huber_loss(weight=): each element's loss weighted; 'mean' over the weights' sum
    for mse and l1, over the count for huber (PyTorch 2.6's values)."""
    x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]])
    y = torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    w = torch.tensor([[1.0, 2.0, 0.5], [0.0, 1.0, 3.0]])
    for fn, total, mean in ((F.mse_loss, 58.8125, 7.84167), (F.l1_loss, 18.25, 2.43333),
                            (F.huber_loss, 14.65625, 2.44271)):
        assert fn(x, y, reduction="none", weight=w).shape == (2, 3)
        assert fn(x, y, reduction="sum", weight=w).item() == pytest.approx(total)
        assert fn(x, y, weight=w).item() == pytest.approx(mean, abs=1e-5)
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        F.mse_loss(x, y, weight=torch.ones(3))
