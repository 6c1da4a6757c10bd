"""One rank of bench/checkpoint.py, for trainrun or PyTorch 2.6 (argv[1]): a state of 64 tensors of
1024 x 512 float32 (128 MiB) sharded Shard(0) over the ranks, saved and loaded with the distributed
checkpoint API, next to a plain write+fsync and read of the same bytes per rank (the disk's rate).
argv[3] "cold": the page cache is dropped before each read (the plain one and the load), so both read
the disk; "warm": they read what the writes left in the page cache. Prints RESULT lines with medians
over 3 repetitions (seconds)."""
import os
import pathlib
import shutil
import statistics
import sys
import time

side, folder, cache = sys.argv[1], sys.argv[2], sys.argv[3]
if side == "trainrun":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
    import trainrun as torch
    import trainrun.distributed as dist
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import Shard, distribute_tensor
else:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
os.makedirs(os.path.dirname(folder), exist_ok=True)
mesh = init_device_mesh("cpu", (world,))
torch.manual_seed(0)
state = {f"layer{i}.weight": distribute_tensor(torch.randn(1024, 512), mesh, [Shard(0)]) for i in range(64)}
target = {k: distribute_tensor(torch.zeros(1024, 512), mesh, [Shard(0)]) for k in state}
my_bytes = sum(v.to_local().numel() * 4 for v in state.values())


def timed(fn, reads=False):
    dist.barrier()
    if reads and cache == "cold":
        if rank == 0:  # the whole host's page cache: every rank's files
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1")
        dist.barrier()
    start = time.perf_counter()
    fn()
    dist.barrier()
    return time.perf_counter() - start


def disk_write():
    with open(f"{folder}.raw{rank}", "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(my_bytes >> 20):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def disk_read():
    with open(f"{folder}.raw{rank}", "rb") as f:
        while f.read(8 << 20):
            pass


results = {"disk_write": [], "disk_read": [], "save": [], "load": [], "async_save_blocks": []}
pending = []
for rep in range(3):
    path = f"{folder}/rep{rep}"
    results["disk_write"].append(timed(disk_write))
    results["disk_read"].append(timed(disk_read, reads=True))
    results["save"].append(timed(lambda: dcp.save(state, checkpoint_id=path)))
    results["load"].append(timed(lambda: dcp.load(target, checkpoint_id=path), reads=True))
    if side == "trainrun":  # PyTorch 2.6's async_save did not return on CPU/Gloo here (the run timed out)
        results["async_save_blocks"].append(timed(lambda: pending.append(dcp.async_save(state,
                                                                                        checkpoint_id=path + "a"))))
        pending.pop().result()
assert all(torch.equal(target[k].to_local(), state[k].to_local()) for k in state), "loaded values differ"
for name, times in results.items():
    if rank == 0 and times:
        print(f"RESULT {name} {statistics.median(times):.4f} {my_bytes * world}", flush=True)
dist.barrier()
if rank == 0:
    shutil.rmtree(folder, ignore_errors=True)
    for r in range(world):
        os.remove(f"{folder}.raw{r}")
dist.destroy_process_group()
os._exit(0)
