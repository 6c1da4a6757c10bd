"""Weights loaded into a model built on the meta device, the ways PyTorch's FSDP2 example does it
(pytorch/examples, distributed/FSDP2/checkpoint.py): load_state_dict(assign=True), where the module takes the
state dict's tensors themselves, on one process and on fully_shard's shards (DTensors made by
distribute_tensor from a full checkpoint), and set_model_state_dict from rank 0's full state dict
(broadcast_from_rank0), which materialises the meta model on the group's device."""
import warnings

import pytest
from built_tree import needs_torch, torch  # noqa: F401

import trainrun as tr
from trainrun import nn


def _net():
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 3))


def test_assign_takes_the_state_dicts_tensors_on_a_meta_model():
    tr.manual_seed(0)
    source = _net()
    state = source.state_dict()
    with tr.device("meta"):
        model = _net()
    model[2].bias.requires_grad_(False)
    assert str(model.load_state_dict(state, assign=True)) == "<All keys matched successfully>"
    for key, value in model.state_dict().items():
        assert not value.is_meta, key
        assert value.data_ptr() == state[key].data_ptr(), key  # the same memory, not a copy
    assert isinstance(model[0].weight, nn.Parameter) and model[0].weight.requires_grad
    assert not model[2].bias.requires_grad  # the module's flag, as PyTorch keeps it
    x = tr.randn(5, 4)
    assert tr.equal(model.eval()(x), source.eval()(x))
    # A Parameter in the state dict is taken as it is.
    w = nn.Parameter(tr.ones(6, 4))
    model.load_state_dict({**state, "0.weight": w}, assign=True)
    assert model[0].weight is w


def test_assign_still_checks_shapes_and_keys():
    with tr.device("meta"):
        model = _net()
    state = _net().state_dict()
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
        model.load_state_dict({**state, "0.weight": tr.zeros(2, 2)}, assign=True)
    assert model[0].weight.is_meta  # nothing was taken
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "2.bias"'):
        model.load_state_dict({k: v for k, v in state.items() if k != "2.bias"}, assign=True)


def test_copying_into_a_meta_model_warns_as_pytorch():
    with tr.device("meta"):
        model = nn.Linear(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.load_state_dict(nn.Linear(2, 3).state_dict())
    assert any("copying from a non-meta parameter in the checkpoint to a meta parameter" in str(w.message)
               for w in caught)
    assert model.weight.is_meta


def test_a_registered_tensor_reads_back_as_itself():
    model = nn.Linear(2, 3)
    w = nn.Parameter(tr.ones(3, 2))
    model.weight = w
    assert model.weight is w
    extra = nn.Parameter(tr.zeros(1))
    model.register_parameter("extra", extra)
    assert model.extra is extra
    steps = tr.zeros(())
    model.register_buffer("steps", steps)
    assert model.steps is steps
    model.steps = steps + 1
    assert model.steps is not steps and float(model.steps) == 1.0


def fsdp_meta_model_loads_full_checkpoints():
    import trainrun as torch
    import trainrun.distributed as dist
    from trainrun.distributed.checkpoint.state_dict import (StateDictOptions, _init_optim_state,
                                                            set_model_state_dict)
    from trainrun.distributed.fsdp import fully_shard
    from trainrun.distributed.tensor import DTensor, distribute_tensor
    nn = torch.nn
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    def build():
        return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 5))

    torch.manual_seed(0)
    reference = build()
    full = reference.state_dict()
    x = torch.randn(3, 4)

    def sharded_meta_model():
        with torch.device("meta"):
            model = build()
        for layer in (model[0], model[2]):
            fully_shard(layer)
        return fully_shard(model)

    # The DTensor way: each full tensor laid out as the meta model's parameter, taken with assign=True.
    model = sharded_meta_model()
    meta_sd = model.state_dict()
    sharded = {k: nn.Parameter(distribute_tensor(v, meta_sd[k].device_mesh, meta_sd[k].placements))
               for k, v in full.items()}
    model.load_state_dict(sharded, strict=False, assign=True)
    for name, p in model.named_parameters():
        assert isinstance(p, DTensor) and not p.to_local().is_meta, name
        assert torch.equal(p.full_tensor(), full[name]), name
    assert torch.allclose(model(x), reference(x))
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())

    # The DCP way: rank 0 alone holds the full state dict; the meta model is materialised on the CPU.
    model = sharded_meta_model()
    set_model_state_dict(model, full if rank == 0 else {},
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    for name, p in model.named_parameters():
        assert torch.equal(p.full_tensor(), full[name]), name
    assert torch.allclose(model(x), reference(x))
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    _init_optim_state(optim)  # state for every parameter, the parameters unchanged (lr 0)
    assert len(optim.state) == 4 and all(p.grad is None for p in model.parameters())
    for name, p in model.named_parameters():
        assert torch.equal(p.full_tensor(), full[name]), name
    dist.destroy_process_group()


def test_fsdp_meta_model_loads_full_checkpoints_on_two_ranks(ranks):
    ranks.run_function(2, fsdp_meta_model_loads_full_checkpoints)


def _reset_after_scribbling(lib, seed=1):
    nn = lib.nn
    lib.manual_seed(0)
    mods = {"gn": nn.GroupNorm(2, 4), "bil": nn.Bilinear(2, 3, 4), "bn": nn.BatchNorm1d(3),
            "inorm": nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
            "ct2": nn.ConvTranspose2d(2, 4, 3, groups=2), "ct1": nn.ConvTranspose1d(2, 3, 2),
            "c1": nn.Conv1d(2, 4, 3), "c3": nn.Conv3d(2, 2, 2, groups=2), "cell": nn.LSTMCell(3, 2),
            "gru": nn.GRUCell(2, 2)}
    with lib.no_grad():
        for m in mods.values():
            for t in list(m.parameters()) + [b for b in m.buffers() if b.dtype.is_floating_point]:
                t.fill_(7.0)
    lib.manual_seed(seed)
    out = {}
    for name, m in mods.items():
        m.reset_parameters()
        out[name] = [t.detach().reshape(-1).tolist() for t in list(m.parameters()) + list(m.buffers())]
    return out


def test_reset_parameters_restores_every_default():
    """What a meta-device model calls after to_empty(): BatchNorm's and InstanceNorm's running statistics come
    back to 0 and 1, affine norms to ones and zeros, PReLU to its init, and the drawn weights are drawn again."""
    out = _reset_after_scribbling(tr)
    assert out["bn"] == [[1.0] * 3, [0.0] * 3, [0.0] * 3, [1.0] * 3, [0]]
    assert out["inorm"] == out["bn"] and out["gn"] == [[1.0] * 4, [0.0] * 4]
    assert all(abs(v) <= 1 / 2 ** 0.5 for t in out["bil"] for v in t)  # U(-1/sqrt(in1), 1/sqrt(in1))
    prelu = nn.PReLU(3, init=0.1)
    with tr.no_grad():
        prelu.weight.fill_(7.0)
    prelu.reset_parameters()
    assert prelu.weight.tolist() == pytest.approx([0.1] * 3)
    lazy = nn.LazyLinear(3)
    lazy.reset_parameters()  # (nothing to reset before its first input)
    lazy(tr.ones(2, 4))
    with tr.no_grad():
        lazy.weight.fill_(7.0)
    lazy.reset_parameters()
    assert lazy.weight.abs().max().item() <= 0.5  # U(-1/sqrt(4), 1/sqrt(4))


@needs_torch
def test_reset_parameters_draws_pytorchs_values():
    ours, theirs = _reset_after_scribbling(tr), _reset_after_scribbling(torch)
    for name in theirs:
        for a, b in zip(ours[name], theirs[name]):
            assert a == pytest.approx(b, abs=1e-6), name
