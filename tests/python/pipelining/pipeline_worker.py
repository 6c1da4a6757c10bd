"""A rank of test_pipelining.py: an 8-layer MLP split evenly over the ranks
(one stage each), trained 5 SGD steps with a schedule (argv: GPipe or 1F1B,
the number of microbatches, "mean" or "sum") next to the same model in one
process over the same microbatches: losses, outputs and every stage's
gradients must agree within 1e-6."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.pipelining import PipelineStage, get_schedule_class  # noqa: E402

WIDTH, LAYERS, BATCH = 12, 8, 16


def make_layers():
    tr.manual_seed(0)
    return [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(LAYERS)]


def main():
    import datetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    schedule_name, n_micro, reduction = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rank, world = dist.get_rank(), dist.get_world_size()
    per = LAYERS // world
    full = nn.Sequential(*make_layers())
    mine = nn.Sequential(*make_layers()[rank * per:(rank + 1) * per])  # this stage's layers
    stage = PipelineStage(mine, rank, world, "cpu")
    schedule = get_schedule_class(schedule_name)(stage, n_micro, loss_fn=F.mse_loss, scale_grads=reduction == "mean")
    opt_full = tr.optim.SGD(full.parameters(), lr=0.1)
    opt = tr.optim.SGD(mine.parameters(), lr=0.1)
    rng = np.random.default_rng(3)
    failures = []
    for step in range(5):
        x = tr.tensor(rng.standard_normal((BATCH, WIDTH)).astype(np.float32))
        y = tr.tensor(rng.standard_normal((BATCH, WIDTH)).astype(np.float32))
        opt_full.zero_grad()
        ref_losses = []
        for xm, ym in zip(x.tensor_split(n_micro), y.tensor_split(n_micro)):
            loss = F.mse_loss(full(xm), ym)
            ref_losses.append(loss.item())
            (loss / n_micro if reduction == "mean" else loss).backward()
        opt.zero_grad()
        losses = []
        out = schedule.step(x, target=y, losses=losses) if stage.is_first and stage.is_last else \
            schedule.step(x) if stage.is_first else schedule.step(target=y, losses=losses) if stage.is_last \
            else schedule.step()
        if stage.is_last:
            got = [l.item() for l in losses]
            if not np.allclose(got, ref_losses, rtol=1e-6, atol=1e-7):
                failures.append(f"step {step}: losses {got} vs {ref_losses}")
            if not np.allclose(out.detach().numpy(), full(x).detach().numpy(), rtol=1e-6, atol=1e-6):
                failures.append(f"step {step}: merged output differs")
        for k, (name, p) in enumerate(mine.named_parameters()):
            layer = rank * per + int(name.split(".")[0])
            q = dict(full.named_parameters())[f"{layer}." + name.split(".", 1)[1]]
            if not np.allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6):
                failures.append(f"step {step}: gradient of layer {layer} {name} differs")
        opt_full.step()
        opt.step()
    if failures:
        print(f"rank {rank}: failures:\n  " + "\n  ".join(failures[:10]), flush=True)
        sys.exit(1)
    print(f"rank {rank}: pipeline {schedule_name} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
