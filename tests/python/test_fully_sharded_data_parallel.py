"""FSDP1's API (FullyShardedDataParallel over fully_shard) on 2 ranks, written as PyTorch's FSDP tutorial
writes it: every ShardingStrategy with an auto-wrap policy trains as one process on the whole batch (weights,
clip_grad_norm_), state dicts keep the unwrapped model's keys (full by default; sharded and rank-0-only under
state_dict_type), optimizer state round-trips through optim_state_dict/optim_state_dict_to_load, no_sync
accumulates, summon_full_params shows full parameters and writes changes back."""
import functools

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(6, 12), nn.Linear(12, 6)

    def forward(self, x):
        return x + self.l2(torch.relu(self.l1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.blocks, self.head = nn.Linear(3, 6), nn.ModuleList([Block(), Block()]), nn.Linear(6, 1)

    def forward(self, x):
        x = self.emb(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def strategies_train_as_one_process():
    from trainrun import distributed as dist
    from trainrun.distributed.fsdp import FullyShardedDataParallel as FSDP
    from trainrun.distributed.fsdp import FullStateDictConfig, ShardingStrategy, StateDictType
    from trainrun.distributed.fsdp.wrap import (ModuleWrapPolicy, size_based_auto_wrap_policy,
                                                 transformer_auto_wrap_policy)
    from trainrun.distributed.tensor import DTensor
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    by_class = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    cases = [(ShardingStrategy.FULL_SHARD, by_class),
             (ShardingStrategy.SHARD_GRAD_OP, ModuleWrapPolicy({Block})),
             (ShardingStrategy.NO_SHARD, functools.partial(size_based_auto_wrap_policy, min_num_params=100)),
             (ShardingStrategy.HYBRID_SHARD, None)]
    for strategy, policy in cases:
        torch.manual_seed(0)
        model, reference = Net(), Net()
        reference.load_state_dict(model.state_dict())
        keys = list(model.state_dict())
        model = FSDP(model, sharding_strategy=strategy, auto_wrap_policy=policy)
        wrapped = type(model.blocks[0]).__name__
        assert wrapped == ("FullyShardedDataParallel" if policy is not None else "Block"), (strategy, wrapped)
        assert [n for n, _ in model.named_parameters()] == [n for n, _ in reference.named_parameters()]
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
        for step in range(3):
            batch = torch.randn(4 * world, 3, generator=torch.Generator().manual_seed(step))
            model(batch[4 * rank:4 * rank + 4]).pow(2).mean().backward()
            norm = model.clip_grad_norm_(1.0)
            reference(batch).pow(2).mean().backward()
            ref_norm = nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
            assert not isinstance(norm, DTensor) and abs(norm.item() - ref_norm.item()) < 1e-5, strategy
            opt.step()
            ref_opt.step()
            opt.zero_grad()
            ref_opt.zero_grad()
        state = model.state_dict()  # FULL_STATE_DICT by default: whole tensors, the unwrapped keys
        assert list(state) == keys, (strategy, list(state))
        for key, value in reference.state_dict().items():
            assert not isinstance(state[key], DTensor) and torch.allclose(state[key], value, atol=1e-5), key
        with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
            assert isinstance(model.state_dict()["blocks.0.l1.weight"], DTensor)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
            assert len(model.state_dict()) == (len(keys) if rank == 0 else 0)
        assert FSDP.get_state_dict_type(model).state_dict_type == StateDictType.FULL_STATE_DICT
        optim_state = FSDP.optim_state_dict(model, opt)
        assert sorted(optim_state["state"]) == sorted(n for n, _ in reference.named_parameters())
        fresh = torch.optim.AdamW(model.parameters(), lr=1e-2)
        fresh.load_state_dict(FSDP.optim_state_dict_to_load(model, fresh, optim_state))
        assert torch.equal(fresh.state_dict()["state"][0]["exp_avg"].full_tensor(),
                           opt.state_dict()["state"][0]["exp_avg"].full_tensor())
        model.load_state_dict(reference.state_dict())  # full tensors load into the shards
    dist.barrier()


def no_sync_and_summon_full_params():
    from trainrun import distributed as dist
    from trainrun.distributed.fsdp import FullyShardedDataParallel as FSDP
    from trainrun.distributed.fsdp.wrap import ModuleWrapPolicy
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model, reference = Net(), Net()
    reference.load_state_dict(model.state_dict())
    model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}))
    batches = [torch.randn(4, 3, generator=torch.Generator().manual_seed(10 * r + k)) for r in range(2)
               for k in range(2)]
    with model.no_sync():  # accumulate locally, then one synced backward
        model(batches[2 * rank]).sum().backward()
    model(batches[2 * rank + 1]).sum().backward()
    for x in batches:
        (reference(x).sum() / 2).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p.grad.full_tensor(), q.grad, atol=1e-5)
    with FSDP.summon_full_params(model):
        assert model.blocks[0].l1.weight.shape == (12, 6) and not hasattr(model.blocks[0].l1.weight, "to_local")
        with torch.no_grad():
            model.head.weight.fill_(0.5)
    assert model.state_dict()["head.weight"].tolist() == [[0.5] * 6]
    dist.barrier()


def wrap_annotations_and_repr():
    """enable_wrap/wrap as PyTorch's FSDP recipes use them, and FSDP's repr: the wrapped module prints as itself."""
    from trainrun import distributed as dist
    from trainrun.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from trainrun.distributed.fsdp.wrap import enable_wrap, wrap
    dist.init_process_group("gloo")
    with enable_wrap(wrapper_cls=FSDP, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP):
        inner = wrap(nn.Linear(3, 4))
        overridden = wrap(nn.Linear(3, 4), sharding_strategy=ShardingStrategy.FULL_SHARD)
        with pytest.raises(NotImplementedError, match="do not nest"):
            with enable_wrap(wrapper_cls=FSDP):
                pass
    assert isinstance(inner, FSDP) and inner.sharding_strategy == ShardingStrategy.SHARD_GRAD_OP
    assert overridden.sharding_strategy == ShardingStrategy.FULL_SHARD
    assert type(wrap(nn.Linear(3, 4))) is nn.Linear  # outside enable_wrap: the module itself
    model = FSDP(nn.Sequential(inner, nn.ReLU()))
    assert repr(model) == ("FullyShardedDataParallel(\n  (_fsdp_wrapped_module): Sequential(\n"
                           "    (0): FullyShardedDataParallel(\n"
                           "      (_fsdp_wrapped_module): Linear(in_features=3, out_features=4, bias=True)\n"
                           "    )\n    (1): ReLU()\n  )\n)"), repr(model)
    assert model(torch.ones(2, 3)).shape == (2, 4)
    assert FSDP.fsdp_modules(model) == [model, inner] and FSDP.fsdp_modules(model, root_only=True) == [model]
    assert model.check_is_root() and not inner.check_is_root()
    assert torch.nn.parallel.data_parallel(nn.Linear(3, 4), torch.ones(2, 3)).shape == (2, 4)
    assert dist.supports_complex(dist.ReduceOp.SUM) and not dist.supports_complex(dist.ReduceOp.MAX)
    dist.barrier()


def test_size_based_policy_defaults_are_pytorchs():
    """Containers are never wrapped themselves and MultiheadAttention is a leaf, unless told otherwise; a module
    is only entered when it is large enough."""
    from trainrun.distributed.fsdp.wrap import _or_policy, size_based_auto_wrap_policy
    big = 10 ** 9
    assert not size_based_auto_wrap_policy(nn.ModuleList([nn.Linear(2, 2)]), False, big)
    assert size_based_auto_wrap_policy(nn.ModuleList([nn.Linear(2, 2)]), False, big, exclude_wrap_modules=set())
    assert not size_based_auto_wrap_policy(nn.MultiheadAttention(4, 2), True, big)
    assert size_based_auto_wrap_policy(nn.Linear(2, 2), True, big) and not \
        size_based_auto_wrap_policy(nn.Linear(2, 2), True, 10, min_num_params=100)
    by_size = functools.partial(size_based_auto_wrap_policy, min_num_params=100)
    assert _or_policy(nn.Linear(2, 2), False, 150, policies=[by_size, lambda **kw: False])


@pytest.mark.parametrize("function", [strategies_train_as_one_process, no_sync_and_summon_full_params,
                                      wrap_annotations_and_repr])
def test_on_two_ranks(ranks, function):
    ranks.run_function(2, function)


def test_rekey_optim_state_dict_between_ids_and_names():
    from trainrun.distributed.fsdp import FullyShardedDataParallel as FSDP, OptimStateKeyType
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    optim = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 2)).sum().backward()
    optim.step()
    by_name = FSDP.rekey_optim_state_dict(optim.state_dict(), OptimStateKeyType.PARAM_NAME, model)
    assert list(by_name["state"]) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert by_name["param_groups"][0]["params"] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    by_id = FSDP.rekey_optim_state_dict(by_name, OptimStateKeyType.PARAM_ID, model, optim=optim)
    assert list(by_id["state"]) == [0, 1, 2, 3]
    fresh = torch.optim.Adam(model.parameters())
    fresh.load_state_dict(by_id)
    assert torch.equal(fresh.state_dict()["state"][2]["exp_avg"], optim.state_dict()["state"][2]["exp_avg"])
