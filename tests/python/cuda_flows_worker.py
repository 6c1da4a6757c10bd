"""What PyTorch users run on one GPU, written as they write it (`import trainrun as torch`), one rank started by
the trainrun launcher over NCCL: each flow is checked against the same computation on the CPU and prints
"OK <flow>"; the first failure raises. test_cuda_flows.py runs it (on a GPU machine: scripts/gpu_check.sh).

    trainrun --nproc-per-node 1 tests/python/cuda_flows_worker.py [--device cpu]   (cpu: gloo, the same code)"""
import argparse
import copy
import os
import pathlib
import sys
import tempfile
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import trainrun as torch  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.distributed.checkpoint as dcp  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.device_mesh import init_device_mesh  # noqa: E402
from trainrun.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: E402
from trainrun.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor  # noqa: E402
from trainrun.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def close(a, b, rtol=1e-4, atol=1e-5, what=""):
    a, b = a.detach().float().cpu(), b.detach().float().cpu()
    if not torch.allclose(a, b, rtol=rtol, atol=atol):
        raise AssertionError(f"{what}: largest difference {(a - b).abs().max().item():.3g}")


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))


def train(model, device, steps=4, lr=1e-2, autocast_dtype=None, scaler=None):
    """Losses of `steps` AdamW steps on fixed batches (made on the CPU, so both devices see the same)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 32, generator=gen).to(device)
        y = torch.randint(0, 8, (16,), generator=gen).to(device)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = F.cross_entropy(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses.append(loss.item())
    return losses


def flow_ddp(device):
    reference = train(mlp(), torch.device("cpu"))
    got = train(DDP(mlp().to(device)), device)
    close(torch.tensor(got), torch.tensor(reference), what="DDP losses")


def flow_fully_shard(device):
    reference_model = mlp()
    reference = train(reference_model, torch.device("cpu"))
    model = mlp().to(device)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    got = train(model, device)
    close(torch.tensor(got), torch.tensor(reference), what="fully_shard losses")
    for (name, p), q in zip(model.named_parameters(), reference_model.parameters()):
        assert isinstance(p, DTensor) and p.device.type == device.type, (name, type(p), p.device)
        close(p.full_tensor(), q, what=f"fully_shard parameter {name}")


def flow_fully_shard_bf16(device):
    reference = train(mlp(), torch.device("cpu"))
    model = mlp().to(device)
    fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
    got = train(model, device)
    close(torch.tensor(got), torch.tensor(reference), rtol=5e-2, atol=5e-2, what="bf16 fully_shard losses")
    assert all(p.dtype == torch.float32 for p in model.parameters())


def flow_autocast_and_grad_scaler(device):
    reference = train(mlp(), torch.device("cpu"))
    model = mlp().to(device)
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        out = model(torch.randn(4, 32, device=device))
    assert out.dtype == torch.bfloat16, out.dtype
    scaler = torch.amp.GradScaler(device.type) if device.type == "cuda" else None
    got = train(model, device, autocast_dtype=torch.float16 if device.type == "cuda" else torch.bfloat16,
                scaler=scaler)
    close(torch.tensor(got), torch.tensor(reference), rtol=5e-2, atol=5e-2, what="autocast losses")
    if scaler is not None:
        assert scaler.get_scale() > 0 and not any(p.grad.isnan().any() for p in model.parameters())


def flow_dtensor(device):
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    full = torch.randn(8, 6)
    d = distribute_tensor(full.to(device), mesh, [Shard(0)])
    assert d.device.type == device.type and d.placements == (Shard(0),)
    close(d.full_tensor(), full, what="distribute_tensor round trip")
    r = d.redistribute(mesh, [Replicate()])
    close((r @ r.t()).full_tensor(), full @ full.t(), what="DTensor matmul")
    close(d.sum(dim=0).full_tensor(), full.sum(dim=0), what="DTensor sum over the sharded dim")


def flow_checkpoint(device):
    model = mlp().to(device)
    fully_shard(model)
    train(model, device, steps=1)
    with tempfile.TemporaryDirectory() as d:
        dcp.save({"model": model.state_dict()}, checkpoint_id=d)
        fresh = mlp().to(device)
        fully_shard(fresh)
        state = {"model": fresh.state_dict()}
        dcp.load(state, checkpoint_id=d)
        fresh.load_state_dict(state["model"])
    for (name, a), b in zip(model.named_parameters(), fresh.parameters()):
        close(a.full_tensor(), b.full_tensor(), 0, 0, what=f"checkpointed {name}")


def flow_attention(device):
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    mask = torch.ones(16, 16, dtype=torch.bool).tril()
    for kwargs in ({"is_causal": True}, {"attn_mask": mask}):
        want = F.scaled_dot_product_attention(q, k, v, **{n: t for n, t in kwargs.items()})
        got = F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device),
                                             **{n: (t.to(device) if torch.is_tensor(t) else t)
                                                for n, t in kwargs.items()})
        close(got, want, what=f"scaled_dot_product_attention {sorted(kwargs)}")
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    x = torch.randn(3, 10, 32)
    on_device = copy.deepcopy(layer).to(device)
    close(on_device(x.to(device)), layer(x), what="TransformerEncoderLayer")
    on_device(x.to(device)).sum().backward()
    layer(x).sum().backward()
    for (name, a), b in zip(on_device.named_parameters(), layer.parameters()):
        close(a.grad, b.grad, rtol=1e-3, atol=1e-4, what=f"TransformerEncoderLayer grad {name}")


def flow_compiled_ddp(device):
    reference = train(mlp(), torch.device("cpu"))
    got = train(torch.compile(DDP(mlp().to(device))), device)
    close(torch.tensor(got), torch.tensor(reference), what="compiled DDP losses")


FLOWS = [flow_ddp, flow_fully_shard, flow_fully_shard_bf16, flow_autocast_and_grad_scaler, flow_dtensor,
         flow_checkpoint, flow_attention, flow_compiled_ddp]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--flows", default="", help="comma-separated flow names (default: all)")
    args = parser.parse_args()
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device(args.device, torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    failed = 0
    for flow in FLOWS:
        name = flow.__name__[len("flow_"):]
        if args.flows and name not in args.flows.split(","):
            continue
        try:
            flow(device)
            print(f"OK {name}", flush=True)
        except Exception as e:  # every flow runs; the exit status says whether any failed
            failed += 1
            print(f"FAILED {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
