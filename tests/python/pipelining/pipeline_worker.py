"""A rank of test_pipelining.py: an 8-layer MLP split evenly over the ranks
(one stage each; two, looped over the ranks, for Interleaved1F1B, LoopedBFS
and InterleavedZeroBubble, or in a V for ZBVZeroBubble; "Interleaved1F1B-csv":
LoopedBFS running interleaved orders loaded from a CSV; "-split": the stages cut
from the whole model by pipeline() at SplitPoint.BEGINNING of their first
layer, their parameters keeping the model's names), trained 5 SGD steps with a schedule (argv: its name,
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
    split = schedule_name.endswith("-split")
    base_name = schedule_name[:-len("-split")] if split else schedule_name
    looped = base_name in ("Interleaved1F1B", "LoopedBFS", "Interleaved1F1B-csv", "InterleavedZeroBubble",
                           "ZBVZeroBubble")
    num_stages = world * (2 if looped else 1)
    per = LAYERS // num_stages
    full = nn.Sequential(*make_layers())
    layers = make_layers()
    if base_name == "ZBVZeroBubble":  # rank r holds stages r and 2R - 1 - r
        indices = [rank, 2 * world - 1 - rank]
    else:
        indices = [rank + c * world for c in range(num_stages // world)]  # stage s runs on rank s % world
    if split:
        from trainrun.distributed.pipelining import SplitPoint, pipeline
        pipe = pipeline(nn.Sequential(*layers), (tr.zeros(BATCH // n_micro, WIDTH),),
                        split_spec={str(s * per): SplitPoint.BEGINNING for s in range(1, num_stages)})
        modules = {s: pipe.get_stage_module(s) for s in indices}
        stages = [pipe.build_stage(s, "cpu") for s in indices]
    else:
        modules = {s: nn.Sequential(*layers[s * per:(s + 1) * per]) for s in indices}  # each stage's layers
        stages = [PipelineStage(modules[s], s, num_stages, "cpu") for s in indices]
    cls = get_schedule_class("LoopedBFS" if base_name.endswith("-csv") else base_name)
    schedule = cls(stages if looped else stages[0], n_micro, loss_fn=F.mse_loss, scale_grads=reduction == "mean")
    if schedule_name.endswith("-csv"):  # every rank writes the same file for itself, then loads it
        import tempfile
        from trainrun.distributed.pipelining import schedules
        text = schedules.orders_to_csv([schedules.interleaved_1f1b_order(r, world, 2, n_micro) for r in range(world)])
        with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
            f.write(text)
            f.flush()
            schedule._load_csv(f.name)
        if schedule.pipeline_order[rank] != schedules.interleaved_1f1b_order(rank, world, 2, n_micro):
            failures_at_load = ["the loaded order is not the file's"]
        else:
            failures_at_load = []
    first, last = any(st.is_first for st in stages), any(st.is_last for st in stages)
    opt_full = tr.optim.SGD(full.parameters(), lr=0.1)
    opt = tr.optim.SGD([p for m in modules.values() for p in m.parameters()], lr=0.1)
    rng = np.random.default_rng(3)
    failures = list(failures_at_load) if schedule_name.endswith("-csv") else []
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
        schedule.record_timeline = step == 4  # the last step's timeline: every rank's computations, in order
        out = schedule.step(x, target=y, losses=losses) if first and last else \
            schedule.step(x) if first else schedule.step(target=y, losses=losses) if last else schedule.step()
        if last:
            got = [l.item() for l in losses]
            if not np.allclose(got, ref_losses, rtol=1e-6, atol=1e-7):
                failures.append(f"step {step}: losses {got} vs {ref_losses}")
            if not np.allclose(out.detach().numpy(), full(x).detach().numpy(), rtol=1e-6, atol=1e-6):
                failures.append(f"step {step}: merged output differs")
        for s, module in modules.items():
            for name, p in module.named_parameters():
                layer = (0 if split else s * per) + int(name.split(".")[0])  # pipeline() keeps the model's names
                q = dict(full.named_parameters())[f"{layer}." + name.split(".", 1)[1]]
                if not np.allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6):
                    failures.append(f"step {step}: gradient of layer {layer} {name} differs")
        opt_full.step()
        opt.step()
    from trainrun.distributed.pipelining.timeline import Timeline
    joined = Timeline.gather(schedule.timeline)
    if sorted(joined.events) != list(range(world)) or \
            [a for _, _, a in joined.events[rank]] != list(schedule.pipeline_order[rank]):
        failures.append(f"the recorded timeline is not the rank's order: {joined.events.get(rank)}")
    if any(e0 > s1 + 1e-9 for evs in joined.events.values() for (_, e0, _), (s1, _, _) in zip(evs, evs[1:])) or \
            not 0.0 <= joined.bubble_ratio < 1.0:
        failures.append(f"the recorded times overlap or the bubble is {joined.bubble_ratio}")
    if failures:
        print(f"rank {rank}: failures:\n  " + "\n  ".join(failures[:10]), flush=True)
        sys.exit(1)
    print(f"rank {rank}: pipeline {schedule_name} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
