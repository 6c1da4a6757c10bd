"""A rank of test_dtensor.py, under the trainrun launcher: every pair of
placements among Shard(0), Shard(1), Replicate, Partial over a mesh (argv:
the mesh shape, e.g. 4 or 2x2 or 2x3), on shapes that divide, do not
divide, and have fewer rows than ranks. Checks that full_tensor() gives the
source back bitwise, that each local piece is torch.chunk's (nested over
mesh dims), and that each single-dim redistribution issues exactly the
expected collective (none for Replicate -> Shard)."""
import itertools
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
from trainrun.distributed.tensor import DTensor, Partial, Replicate, Shard, init_device_mesh  # noqa: E402
from trainrun.distributed.tensor.debug import CommDebugMode  # noqa: E402
from trainrun.distributed.tensor.placement_types import chunk_sizes  # noqa: E402

CHOICES = [Shard(0), Shard(1), Replicate(), Partial()]
EXPECTED = {  # (src, dst) on one mesh dim -> the collectives it takes (names of torch.ops.c10d_functional)
    ("S0", "R"): {"all_gather_into_tensor": 1}, ("S1", "R"): {"all_gather_into_tensor": 1},
    ("P", "R"): {"all_reduce": 1}, ("P", "S0"): {"reduce_scatter_tensor": 1},
    ("P", "S1"): {"reduce_scatter_tensor": 1}, ("R", "S0"): {}, ("R", "S1"): {},
    ("S0", "S1"): {"all_to_all_single": 1}, ("S1", "S0"): {"all_to_all_single": 1}, ("R", "P"): {},
    ("S0", "P"): {"all_gather_into_tensor": 1}, ("S1", "P"): {"all_gather_into_tensor": 1},
}


def short(p):
    return "S%d" % p.dim if isinstance(p, Shard) else "R" if isinstance(p, Replicate) else "P"


def expected_piece(array, mesh, placements):
    """This rank's piece by nested chunking (mesh dim 0 first), as torch.chunk splits."""
    piece = array
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            sizes = chunk_sizes(piece.shape[p.dim], mesh.size(i))
            c = mesh.get_coordinate()[i]
            piece = np.take(piece, range(sum(sizes[:c]), sum(sizes[:c + 1])), axis=p.dim)
    return piece


def make(array, mesh, placements):
    """A DTensor of `array` with the given placements, Partial as the whole value on coordinate 0 and zeros
    elsewhere (so the sum is exact)."""
    piece = expected_piece(array, mesh, [p if not p.is_partial() else Replicate() for p in placements])
    for i, p in enumerate(placements):
        if p.is_partial() and mesh.get_coordinate()[i] != 0:
            piece = np.zeros_like(piece)
    return DTensor.from_local(tr.tensor(np.ascontiguousarray(piece)), mesh, placements, shape=array.shape)


def main():
    dist.init_process_group("gloo")
    shape = tuple(int(s) for s in sys.argv[1].split("x"))
    names = ("a", "b", "c")[:len(shape)]
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    rank, failures, checked = dist.get_rank(), [], 0
    for tensor_shape in [(8, 6), (7, 5), (3, 2)]:
        array = (np.arange(np.prod(tensor_shape), dtype=np.float32).reshape(tensor_shape) * 1.5 - 4)
        combos = list(itertools.product(CHOICES, repeat=mesh.ndim))
        for src in combos:
            x = make(array, mesh, src)
            for dst in combos:
                with CommDebugMode() as comm:
                    y = x.redistribute(placements=dst)
                counts = {op._name: n for op, n in comm.get_comm_counts().items()}  # (op -> count, as PyTorch's)
                full = y.full_tensor().numpy()
                checked += 1
                label = f"{tensor_shape} {[short(p) for p in src]} -> {[short(p) for p in dst]}"
                if not np.array_equal(full, array):
                    failures.append(f"full_tensor differs: {label}")
                if not any(p.is_partial() for p in dst) and \
                        not np.array_equal(y.to_local().numpy(), expected_piece(array, mesh, dst)):
                    failures.append(f"local piece differs from torch.chunk's: {label}")
                if mesh.ndim == 1 and src != dst:
                    want = EXPECTED.get((short(src[0]), short(dst[0])))
                    if want is not None and counts != want:
                        failures.append(f"collectives {counts}, expected {want}: {label}")
                if all(p.is_replicate() for p in src) and counts:
                    failures.append(f"Replicate -> {dst} communicated {counts}")
    if failures:
        print(f"rank {rank}: {len(failures)} failures of {checked}:\n  " + "\n  ".join(failures[:20]), flush=True)
        sys.exit(1)
    print(f"rank {rank}: redistribute ok ({checked} pairs)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
