"""A rank of test_pipelining.py's PP x FSDP test: 4 ranks as a (pp=2, dp=2) mesh. An 8-layer MLP is cut
into pipeline stages over "pp" (argv[1]: the schedule; one stage per rank, or two for the looped and V
schedules); each stage's layers are sharded with fully_shard over "dp" (reshard_after_forward=True: every
microbatch's backward gathers its own forward's parameters again), and each dp rank trains on its own half
of the batch. Next to it, the whole model in one process on the full batch: per-microbatch losses, every
gradient (gathered from the shards), clip_grad_norm_'s total norm (summed over the dp shards and the
pipeline stages) and the weights after 3 SGD steps must agree within 1e-5."""
import datetime
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.device_mesh import init_device_mesh  # noqa: E402
from trainrun.distributed.fsdp import fully_shard  # noqa: E402
from trainrun.distributed.pipelining import PipelineStage, get_schedule_class  # noqa: E402
from trainrun.distributed.pipelining.schedules import RESHARD, UNSHARD  # noqa: E402
from trainrun.distributed.pipelining.zero_bubble import v_rank  # noqa: E402
from trainrun.distributed.tensor import DTensor  # noqa: E402

WIDTH, LAYERS, ROWS, MICRO = 12, 8, 8, 4  # ROWS per dp rank


def make_layers():
    tr.manual_seed(0)
    return [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(LAYERS)]


def full(t):
    return (t.full_tensor() if isinstance(t, DTensor) else t).detach().numpy()


def sharded(module, name):
    """module's parameter `name` as its DTensor."""
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return getattr(module, leaf)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    name = sys.argv[1]
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp"))
    pp, dp = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()
    multi = name not in ("GPipe", "1F1B")
    num_stages = 2 * (2 if multi else 1)
    per = LAYERS // num_stages
    indices = [s for s in range(num_stages) if (v_rank(s, 2) if name == "ZBVZeroBubble" else s % 2) == pp]
    reference = nn.Sequential(*make_layers())
    layers = make_layers()
    modules = {}
    for s in indices:
        module = nn.Sequential(*layers[s * per:(s + 1) * per])
        for block in module:
            fully_shard(block, mesh=mesh["dp"])
        modules[s] = fully_shard(module, mesh=mesh["dp"])
    stages = [PipelineStage(modules[s], s, num_stages, "cpu", group=mesh["pp"].get_group()) for s in indices]
    schedule = get_schedule_class(name)(stages if multi else stages[0], MICRO, loss_fn=F.mse_loss)
    failures = []
    kinds = [a.computation_type for a in schedule.actions]
    if kinds.count(UNSHARD) != len(indices) or kinds.count(RESHARD) != len(indices):
        failures.append(f"the lowered actions have {kinds.count(UNSHARD)} UNSHARD and {kinds.count(RESHARD)} RESHARD")
    first, last = any(st.is_first for st in stages), any(st.is_last for st in stages)
    opt_ref = tr.optim.SGD(reference.parameters(), lr=0.1)
    opt = tr.optim.SGD([p for m in modules.values() for p in m.parameters()], lr=0.1)
    rng = np.random.default_rng(5)
    for step in range(3):
        x = tr.tensor(rng.standard_normal((2 * ROWS, WIDTH)).astype(np.float32))
        y = tr.tensor(rng.standard_normal((2 * ROWS, WIDTH)).astype(np.float32))
        opt_ref.zero_grad()
        ref_losses = [[F.mse_loss(reference(xm), ym) for xm, ym in zip(x[d * ROWS:(d + 1) * ROWS].tensor_split(MICRO),
                                                                       y[d * ROWS:(d + 1) * ROWS].tensor_split(MICRO))]
                      for d in range(2)]
        (sum(sum(ls) for ls in ref_losses) / (2 * MICRO)).backward()  # the mean over dp ranks and microbatches
        opt.zero_grad()
        mine_x, mine_y, losses = x[dp * ROWS:(dp + 1) * ROWS], y[dp * ROWS:(dp + 1) * ROWS], []
        if first and last:
            schedule.step(mine_x, target=mine_y, losses=losses)
        elif first:
            schedule.step(mine_x)
        else:
            schedule.step(target=mine_y, losses=losses) if last else schedule.step()
        if last:
            got, want = [l.item() for l in losses], [l.item() for l in ref_losses[dp]]
            if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                failures.append(f"step {step}: losses {got} vs {want}")
        ref_params = dict(reference.named_parameters())
        for s, module in modules.items():
            for pname, p in module.named_parameters():
                q = ref_params[f"{s * per + int(pname.split('.')[0])}.{pname.split('.', 1)[1]}"]
                g = sharded(module, pname).grad
                if g is None or not np.allclose(full(g), q.grad.numpy(), rtol=1e-5, atol=1e-6):
                    failures.append(f"step {step}: gradient of stage {s} {pname} differs")
        norm = nn.utils.clip_grad_norm_([p for m in modules.values() for p in m.parameters()], 1e9)
        norm_ref = nn.utils.clip_grad_norm_(reference.parameters(), 1e9)
        if abs(norm.item() - norm_ref.item()) > 1e-5 * max(1.0, norm_ref.item()):
            failures.append(f"step {step}: clip_grad_norm_ {norm.item()} vs {norm_ref.item()} (one process)")
        opt_ref.step()
        opt.step()
    for s, module in modules.items():
        for pname, p in module.named_parameters():
            q = dict(reference.named_parameters())[f"{s * per + int(pname.split('.')[0])}.{pname.split('.', 1)[1]}"]
            if not np.allclose(full(sharded(module, pname)), q.detach().numpy(), rtol=1e-5, atol=1e-6):
                failures.append(f"final weight of stage {s} {pname} differs")
    if failures:
        print(f"rank {dist.get_rank()}: failures:\n  " + "\n  ".join(failures[:10]), flush=True)
        sys.exit(1)
    print(f"rank {dist.get_rank()}: pp x fsdp {name} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
