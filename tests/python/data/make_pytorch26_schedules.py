"""Writes pytorch26_schedules.json: the compute actions of PyTorch 2.6's multi-stage schedules (LoopedBFS,
Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble) per rank, bubbles (None) left out, for a grid of
(ranks, stages per rank, microbatches), in PyTorch's notation ("2F0", "1I3", "3W1"). Run once inside the
PyTorch 2.6 peer (it builds the orders without processes or stages):

    ../shared/peer-modern/enter.sh python3 /peer/tests/python/data/make_pytorch26_schedules.py"""
import json
import pathlib

from torch.distributed.pipelining import schedules as s

GRID = [(2, 2, 2), (2, 2, 4), (2, 2, 8), (4, 2, 4), (4, 2, 8), (4, 2, 16), (2, 3, 4), (4, 3, 8)]


def orders(cls, ranks, per_rank, micro):
    sched = cls.__new__(cls)
    sched.pp_group_size, sched.n_local_stages, sched._n_microbatches = ranks, per_rank, micro
    sched.num_stages = ranks * per_rank
    sched._stages = [None] * per_rank
    sched.number_of_rounds = max(1, micro // ranks)
    sched.microbatches_per_round = micro // sched.number_of_rounds
    sched.pipeline_order = {r: sched._calculate_single_rank_operations(r) for r in range(ranks)}
    return [[str(a) for a in sched.pipeline_order[r] if a is not None] for r in range(ranks)]


out = {}
for name in ("LoopedBFS", "Interleaved1F1B", "InterleavedZeroBubble", "ZBVZeroBubble"):
    cls = s.get_schedule_class(name)
    for ranks, per_rank, micro in GRID:
        if name == "ZBVZeroBubble" and per_rank != 2:
            continue
        if name == "Interleaved1F1B" and micro % ranks:
            continue
        out[f"{name} {ranks} {per_rank} {micro}"] = orders(cls, ranks, per_rank, micro)
path = pathlib.Path(__file__).resolve().parent / "pytorch26_schedules.json"
path.write_text(json.dumps(out, indent=0) + "\n")
print(f"wrote {len(out)} schedules to {path}")
