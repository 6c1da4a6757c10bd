"""One rank of bench/fsdp_init.py, the same code for trainrun and PyTorch 2.6: a model of 8 blocks of
Linear(1024, 4096) and Linear(4096, 1024) (256 MiB of float32 weights) made ready for FSDP2 two ways.
argv[1] "eager": built in memory (each layer initialised as it is made), then fully_shard on each block and
the root; "meta": built under `with device("meta")`, fully_shard, to_empty(device="cpu"), then
reset_parameters() on every layer in order from the seed. argv[2]: "trainrun" or "torch". Rank 0 prints
"RESULT ms <time> mib <peak resident growth> same <yes|no>": `same` says whether the sharded first weight,
gathered, equals that weight made in one process from the same seed (an nn.Linear built right after
manual_seed)."""
import pathlib
import resource
import sys
import time

if sys.argv[2] == "trainrun":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
    import trainrun as torch
    import trainrun.distributed as dist
    import trainrun.nn as nn
    from trainrun.distributed.fsdp import fully_shard
else:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.fsdp import fully_shard
    torch.set_num_threads(1)

DIM, HIDDEN, BLOCKS = 1024, 4096, 8


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build():
    return nn.Sequential(*[nn.Sequential(nn.Linear(DIM, HIDDEN), nn.Linear(HIDDEN, DIM)) for _ in range(BLOCKS)])


def main():
    mode = sys.argv[1]
    dist.init_process_group("gloo")
    dist.barrier()
    before, start = peak_rss_mib(), time.perf_counter()
    torch.manual_seed(0)
    if mode == "meta":
        with torch.device("meta"):
            model = build()
    else:
        model = build()
    for block in model:
        fully_shard(block)
    fully_shard(model)
    if mode == "meta":
        model.to_empty(device="cpu")
        torch.manual_seed(0)
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.reset_parameters()
    dist.barrier()
    ms, mib = (time.perf_counter() - start) * 1e3, peak_rss_mib() - before
    first = model[0][0].weight.full_tensor()
    torch.manual_seed(0)
    same = bool(torch.equal(first, nn.Linear(DIM, HIDDEN).weight.detach()))
    if dist.get_rank() == 0:
        print(f"RESULT ms {ms:.0f} mib {mib:.0f} same {'yes' if same else 'no'}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
