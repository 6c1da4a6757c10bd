"""optim.swa_utils (AveragedModel with SWA and EMA averaging, SWALR, update_bn) against PyTorch 1.13;
autograd.gradcheck/gradgradcheck (pass on correct formulas, fail on a wrong backward); aminmax,
fill_diagonal_, apply_/map_, Module.type, BatchNorm's attributes and BatchNorm3d against PyTorch."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


def _np(t):
    return np.array(t.detach().tolist(), dtype=float)


def _pair(seed=0):
    peer.manual_seed(seed)
    theirs = peer.nn.Sequential(peer.nn.Linear(3, 4), peer.nn.BatchNorm1d(4), peer.nn.ReLU(), peer.nn.Linear(4, 2))
    ours = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    ours.load_state_dict({k: torch.tensor(v.tolist(), dtype=torch.int64 if k.endswith("tracked") else None)
                          for k, v in theirs.state_dict().items()})
    return ours, theirs


@needs_torch
@pytest.mark.parametrize("averaging", ["swa", "ema", "ema per tensor"])
def test_averaged_model_and_swalr_follow_pytorch(averaging):
    from trainrun.optim import swa_utils as ours_swa
    from torch.optim import swa_utils as their_swa
    ours, theirs = _pair()
    kind = {"swa": {}, "ema": {"multi_avg_fn": "multi"}, "ema per tensor": {"avg_fn": "single"}}[averaging]

    def averaged(lib, swa, model):
        if not kind:
            return swa.AveragedModel(model)
        if "multi_avg_fn" in kind:
            if not hasattr(swa, "get_ema_multi_avg_fn"):  # PyTorch 1.13 has no multi_avg_fn: the same EMA
                return swa.AveragedModel(model, avg_fn=lambda e, c, n: 0.9 * e + 0.1 * c)
            return swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9))
        return swa.AveragedModel(model, avg_fn=lambda e, c, n: 0.9 * e + 0.1 * c)
    avg_ours, avg_theirs = averaged(torch, ours_swa, ours), averaged(peer, their_swa, theirs)
    opt_ours, opt_theirs = torch.optim.SGD(ours.parameters(), lr=0.1), peer.optim.SGD(theirs.parameters(), lr=0.1)
    sched_ours = ours_swa.SWALR(opt_ours, swa_lr=0.02, anneal_epochs=3)
    sched_theirs = their_swa.SWALR(opt_theirs, swa_lr=0.02, anneal_epochs=3)
    peer.manual_seed(1)
    batches = [peer.randn(8, 3) for _ in range(5)]
    for x in batches:
        for model, opt, lib in ((ours, opt_ours, torch), (theirs, opt_theirs, peer)):
            inp = torch.tensor(x.tolist()) if lib is torch else x
            opt.zero_grad()
            model(inp).pow(2).mean().backward()
            opt.step()
        sched_ours.step()
        sched_theirs.step()
        avg_ours.update_parameters(ours)
        avg_theirs.update_parameters(theirs)
        assert sched_ours.get_last_lr() == pytest.approx(sched_theirs.get_last_lr(), rel=1e-9)
    # (the parameters: PyTorch 1.13 leaves the copy's buffers as they were; 2.x, as trainrun, follows the model's)
    for (name, a), b in zip(avg_ours.module.named_parameters(), avg_theirs.module.parameters()):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-4, atol=1e-6, err_msg=name)
    assert torch.equal(avg_ours.module[1].running_mean, ours[1].running_mean)
    assert int(avg_ours.n_averaged) == int(avg_theirs.n_averaged) == 5
    ours_swa.update_bn([torch.tensor(x.tolist()) for x in batches], avg_ours)
    their_swa.update_bn(batches, avg_theirs)
    for key in ("1.running_mean", "1.running_var"):
        np.testing.assert_allclose(_np(avg_ours.module.state_dict()[key]), _np(avg_theirs.module.state_dict()[key]),
                                   rtol=1e-4, atol=1e-6, err_msg=key)
    x = torch.tensor(batches[0].tolist())
    np.testing.assert_allclose(_np(avg_ours.eval()(x)), _np(avg_theirs.eval()(batches[0])), rtol=1e-4, atol=1e-5)


def test_gradcheck_passes_correct_gradients_and_catches_a_wrong_one():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: (a.sin() @ b).tanh(), (x, w))
    assert torch.autograd.gradgradcheck(lambda a, b: (a.sin() @ b).tanh(), (x, w))

    class WrongSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return 3 * a * g  # should be 2 * a * g
    assert torch.autograd.gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False
    with pytest.raises(torch.autograd.GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        torch.autograd.gradcheck(WrongSquare.apply, (x,))
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        torch.autograd.gradcheck(lambda a: a * 2, (torch.ones(2, dtype=torch.float64),))
    assert torch.equal(x, x.detach().clone())  # the perturbations were undone


@needs_torch
def test_small_surface_matches_pytorch():
    peer.manual_seed(0)
    a = peer.randn(3, 5)
    mine = torch.tensor(a.tolist())
    got, want = torch.aminmax(mine, dim=1, keepdim=True), peer.aminmax(a, dim=1, keepdim=True)
    assert np.allclose(_np(got.min), _np(want.min)) and np.allclose(_np(got.max), _np(want.max))
    assert float(mine.aminmax().max) == float(a.aminmax().max)
    for shape, wrap in (((3, 3), False), ((7, 3), True), ((7, 3), False), ((3, 7), False), ((2, 2, 2), False)):
        np.testing.assert_array_equal(_np(torch.zeros(*shape).fill_diagonal_(2.0, wrap=wrap)),
                                      _np(peer.zeros(*shape).fill_diagonal_(2.0, wrap=wrap)), err_msg=str(shape))
    np.testing.assert_array_equal(_np(mine.clone().apply_(lambda v: v * v + 1)), _np(a.clone().apply_(
        lambda v: v * v + 1)))
    row = peer.randn(5)
    np.testing.assert_allclose(_np(mine.clone().map_(torch.tensor(row.tolist()), lambda u, v: u - 2 * v)),
                               _np(a.clone().map_(row, lambda u, v: u - 2 * v)), rtol=1e-6)
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).type(torch.float64)
    assert model[0].weight.dtype == torch.float64 and model[1].running_mean.dtype == torch.float64
    bn = nn.BatchNorm2d(6, eps=1e-3, momentum=0.2, affine=False)
    assert (bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats) == (6, 1e-3, 0.2, False, True)
    theirs3, ours3 = peer.nn.BatchNorm3d(2, momentum=0.3), nn.BatchNorm3d(2, momentum=0.3)
    x = peer.randn(2, 2, 3, 4, 5)
    np.testing.assert_allclose(_np(ours3(torch.tensor(x.tolist()))), _np(theirs3(x)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(ours3.running_var), _np(theirs3.running_var), rtol=1e-5)
    with pytest.raises(ValueError, match="expected 5D input"):
        ours3(torch.ones(2, 2, 3, 4))
    ours3.reset_running_stats()
    assert torch.equal(ours3.running_var, torch.ones(2)) and int(ours3.num_batches_tracked) == 0


def test_version_jit_and_attention_backends():
    assert torch.__version__ >= "2.0" and torch.__version__ < (3,) and torch.__version__.startswith("2.")
    assert torch.version.__version__ == torch.__version__ and torch.version.hip is None
    assert torch.version.cuda.count(".") == 1  # the CUDA runtime the build compiled against
    assert not torch.jit.is_scripting() and not torch.jit.is_tracing()
    assert torch.jit.ignore(len) is len and torch.jit.unused(drop=True)(len) is len
    with pytest.raises(NotImplementedError, match="TorchScript is not part of trainrun"):
        torch.jit.script(nn.Linear(2, 2))
    from trainrun.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(1, 2, 3, 4)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
        out = nn.functional.scaled_dot_product_attention(q, q, q)
    assert torch.allclose(out, nn.functional.scaled_dot_product_attention(q, q, q))
    with pytest.raises(RuntimeError, match="MATH backend only"):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            pass
    with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
        pass


@needs_torch
def test_printoptions_match_pytorch():
    values = [[1.123456789, 2e-8, 300.5], [-4.0, 0.5, 1e5]]
    try:
        for options in ({"precision": 2}, {"precision": 2, "sci_mode": False}, {"precision": 6}):
            torch.set_printoptions(**options)
            peer.set_printoptions(**options)
            for data in (values, values[0]):  # the same values in the same notation (column padding aside)
                ours, theirs = repr(torch.tensor(data)), repr(peer.tensor(data))
                assert "".join(ours.split()) == "".join(theirs.split()), (options, ours, theirs)
            assert repr(torch.tensor([1, 2, 3])) == repr(peer.tensor([1, 2, 3]))
    finally:
        torch.set_printoptions(profile="default")
        peer.set_printoptions(profile="default")
    assert repr(torch.tensor([1.5])) == "tensor([1.5000])"


@needs_torch
def test_containers_init_and_ensembles_match_pytorch():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    seq.insert(1, nn.Tanh())
    seq.extend([nn.Linear(3, 1)])
    assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "ReLU", "Linear"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "3.weight", "3.bias"]
    assert type(seq.pop(1)).__name__ == "Tanh" and list(seq.state_dict())[-1] == "2.bias"
    assert tuple(seq(torch.ones(4, 2)).shape) == (4, 1)
    layers = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    layers.insert(0, nn.Linear(1, 1))
    del layers[1]
    assert [type(m).__name__ for m in layers] == ["Linear", "Tanh"] and list(layers.state_dict()) == ["0.weight",
                                                                                                      "0.bias"]
    for groups in (1, 2):
        ours, theirs = torch.empty(4, 2, 3, 3), peer.empty(4, 2, 3, 3)
        np.testing.assert_array_equal(_np(nn.init.dirac_(ours, groups)), _np(peer.nn.init.dirac_(theirs, groups)))
    models = [nn.Linear(2, 3) for _ in range(3)]
    params, buffers = torch.func.stack_module_state(models)
    assert tuple(params["weight"].shape) == (3, 3, 2) and params["weight"].requires_grad and buffers == {}
    assert torch.equal(params["bias"][1], models[1].bias.detach())
    x = torch.randn(5, 2)
    ensemble = torch.vmap(lambda p, b, data: torch.func.functional_call(models[0], (p, b), (data,)),
                          in_dims=(0, 0, None))(params, buffers, x)
    assert torch.allclose(ensemble[2], models[2](x), atol=1e-6)
    grads = [p.grad for p in models[0].parameters()]
    nn.utils.clip_grad_norm_(models[0].parameters(), 1.0, foreach=True)  # (PyTorch's keyword, accepted)
    assert grads == [None, None]


def test_module_dict_views_and_conv_padding_modes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 3)
            self.blocks = nn.ModuleList([nn.Linear(3, 3)])
            self.register_buffer("step", torch.zeros(1))
            self.register_parameter("extra", None)

    net = Net()
    assert list(net._modules) == ["fc", "blocks"] and list(net.fc._parameters) == ["weight", "bias"]
    assert list(net._buffers) == ["step"] and dict(net._parameters) == {"extra": None}
    net._modules["fc"] = nn.Linear(2, 5)  # replaces the child, as assignment does
    assert net.fc.out_features == 5 and tuple(dict(net.named_parameters())["fc.weight"].shape) == (5, 2)
    del net._modules["blocks"]
    assert list(net._modules) == ["fc"] and "blocks.0.weight" not in net.state_dict()
    net._parameters["extra"] = nn.Parameter(torch.ones(2))
    assert "extra" in dict(net.named_parameters()) and torch.equal(net.extra, torch.ones(2))
    assert torch.equal(net.get_buffer("step"), torch.zeros(1))
    with pytest.raises(NotImplementedError, match="belongs to the C\\+\\+ layer"):
        del net.fc._parameters["bias"]


@needs_torch
def test_conv_padding_modes_match_pytorch():
    for mode in ("zeros", "reflect", "replicate", "circular"):
        theirs = peer.nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode)
        ours = nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode)
        ours.load_state_dict({k: torch.tensor(v.tolist()) for k, v in theirs.state_dict().items()})
        x = peer.randn(1, 2, 5, 6)
        np.testing.assert_allclose(_np(ours(torch.tensor(x.tolist()))), _np(theirs(x)), atol=1e-5, err_msg=mode)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")
