"""DeviceMesh._flatten as torchtitan uses it (PyTorch 2.6): dims merged under a name, then sliced from the root
mesh by that name, alone or with other dims (root["dp_replicate", "dp_shard_cp"]); the flattened lines' groups
reduce over the right ranks, and fully_shard over a flattened mesh trains as one process does. On a (1, 2, 2)
mesh of 4 ranks through the launcher."""
import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import pytest  # noqa: E402

import trainrun as torch  # noqa: E402


def flattened_meshes():
    from trainrun import distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.fsdp import fully_shard
    root = init_device_mesh("cpu", (1, 2, 2), mesh_dim_names=("dp_replicate", "dp_shard", "cp"))
    rank = dist.get_rank()
    dp = root["dp_replicate", "dp_shard"]._flatten("dp")
    shard_cp = root["dp_shard", "cp"]._flatten("dp_shard_cp")
    root["dp_replicate", "dp_shard", "cp"]._flatten("dp_cp")
    assert dp.mesh_dim_names == ("dp",) and dp.mesh.tolist() == [rank % 2, rank % 2 + 2]
    assert shard_cp.mesh.tolist() == [0, 1, 2, 3]

    # Sliced from the root by the flattened name: the same ranks, and groups that reduce over exactly them.
    assert root["dp"].mesh.tolist() == dp.mesh.tolist() and root["dp"] == dp
    assert root["dp_shard_cp"].size() == 4 and root["dp_cp"].size() == 4
    both = root["dp_replicate", "dp_shard_cp"]
    assert both.shape == (1, 4) and both.mesh_dim_names == ("dp_replicate", "dp_shard_cp")
    assert both.get_local_rank("dp_shard_cp") == rank
    x = torch.tensor([float(rank)])
    dist.all_reduce(x, group=root["dp"].get_group())
    assert x.item() == (rank % 2) * 2 + 2  # ranks r and r + 2
    with pytest.raises(KeyError, match="in the mesh's order"):
        root["dp_shard_cp", "dp_replicate"]
    with pytest.raises(KeyError, match="no dim named 'nope'"):
        root["nope"]
    with pytest.raises(ValueError, match="already names other dims"):
        root["dp_replicate", "dp_shard"]._flatten("dp_cp")

    # fully_shard over the flattened mesh (torchtitan's fully_shard(model, mesh=world_mesh["dp_shard_cp"])).
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    model.load_state_dict(reference.state_dict())
    fully_shard(model, mesh=root["dp_shard_cp"])
    opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(reference.parameters(), lr=0.1)
    data = torch.randn(8, 6)
    for _ in range(2):
        model(data.chunk(4)[rank]).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        reference(data).pow(2).mean().backward()
        ref_opt.step()
        ref_opt.zero_grad()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p.full_tensor(), q, atol=1e-6), (p.full_tensor(), q)
    dist.destroy_process_group()


def test_flattened_meshes_on_four_ranks(ranks):
    ranks.run_function(4, flattened_meshes)
