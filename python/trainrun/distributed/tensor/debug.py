"""torch.distributed.tensor.debug: CommDebugMode (the collectives DTensor and fully_shard issue, by op and by
module: _comm_debug_mode.py) and visualize_sharding."""
from trainrun.distributed.tensor import _redistribute
from trainrun.distributed.tensor._comm_debug_mode import CommDebugMode  # noqa: F401


def visualize_sharding(dtensor, header=""):
    """Prints which ranks hold which block of a 1-d or 2-d DTensor, as PyTorch's: a table whose rows and
    columns are the blocks' index ranges and whose cells name the devices ("cpu:0, cpu:2" where a block is
    replicated). Printed once, by the rank at coordinate 0 of every mesh dim; nothing for an empty tensor."""
    import numpy as np
    if dtensor.numel() == 0:
        return
    if len(dtensor.shape) >= 3:
        raise RuntimeError("visualize sharding is only implemented for 1D or 2D dtensor")
    mesh = dtensor.device_mesh
    coordinate = mesh.get_coordinate()
    if coordinate is None or any(c != 0 for c in coordinate):
        return
    print(header)
    print(_sharding_table(dtensor, np))


def _sharding_table(dtensor, np):
    mesh, placements = dtensor.device_mesh, dtensor.placements
    cells = {}
    for coordinate, rank in np.ndenumerate(np.array(mesh.mesh.tolist())):
        local, offset = _redistribute.local_shape(tuple(dtensor.shape), mesh, placements, list(coordinate))
        if len(dtensor.shape) == 1:
            local, offset = [1, local[0]], [0, offset[0]]
        if 0 in local:
            continue  # (an empty piece of an uneven split)
        block = ((offset[0], offset[0] + local[0] - 1), (offset[1], offset[1] + local[1] - 1))
        cells.setdefault(block, []).append(f"{mesh.device_type}:{rank}")
    rows = sorted({b[0] for b in cells})
    cols = sorted({b[1] for b in cells})
    table = [[f"Row {r[0]}-{r[1]}"] + [", ".join(cells.get((r, c), [])) for c in cols] for r in rows]
    header = [""] + [f"Col {c[0]}-{c[1]}" for c in cols]
    widths = [max(len(line[i]) for line in table + [header]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
              for line in table]
    return "\n".join(lines)
