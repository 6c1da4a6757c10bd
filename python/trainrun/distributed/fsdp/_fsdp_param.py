"""One parameter of a fully_shard group: its slots (module, name), global
shape, and this rank's shard (torch.chunk's rows along dim 0). Every rank
sends the same number of elements to a gather (its rows padded to
ceil(dim0 / N)), so the gathered buffer is rank-major and the full
parameter is its prefix."""
from trainrun import _C
from trainrun.distributed.tensor._module_views import gradient_sum_group, views_off
from trainrun.distributed.tensor.placement_types import chunk_offsets, chunk_sizes


class FSDPParam:
    def __init__(self, module, name, full, group_size, rank, outer=None):
        self.slots = [(module, name)]
        self.outer = outer  # the tensor-parallel DTensor whose local piece `full` is (FSDP x TP), or None
        # Sequence parallelism sums this parameter's gradient over its group (a hook on the tensor this replaces)
        self.gradient_sum_group = gradient_sum_group(module, name)
        self.shape = tuple(full.shape)
        self.rows = chunk_sizes(self.shape[0], group_size)
        self.padded_rows = -(-self.shape[0] // group_size)
        self.row_numel = int(full.numel() // max(self.shape[0], 1)) if self.shape[0] else 0
        self.padded_numel = self.padded_rows * self.row_numel  # what each rank sends to a gather
        start = chunk_offsets(self.shape[0], group_size)[rank]
        shard = full.detach().narrow(0, start, self.rows[rank]).contiguous().clone()
        shard.requires_grad_(full.requires_grad)
        self.shard = shard
        for m, n in self.slots:
            m._replace_parameter(n, shard)

    @property
    def requires_grad(self):
        return self.shard.requires_grad

    def add_slot(self, module, name):
        self.slots.append((module, name))
        module._replace_parameter(name, self.shard)

    def replace_shard(self, shard):
        """A new tensor for the shard (materialising a meta-device model): every slot takes it."""
        shard.requires_grad_(self.shard.requires_grad)
        self.shard = shard
        for m, n in self.slots:
            m._replace_parameter(n, shard)

    def install(self, tensor, full):
        """Puts tensor (the shard, or the gathered parameter while full) in every slot; while full, the
        modules' attributes give it too (their forward reads self.weight)."""
        for m, n in self.slots:
            m._replace_parameter(n, tensor)
            views_off(m, full)

    def send_buffer(self, dtype):
        """This rank's padded rows, flat, in dtype: what it contributes to a gather."""
        return padded(self.shard.detach().reshape([-1]).to(dtype), self.padded_numel)

    def full_view(self, gathered, group_size):
        """The full parameter inside a gathered buffer (a view: torch.chunk pads only after the last rows)."""
        return gathered.view([group_size * self.padded_rows] + list(self.shape[1:])).narrow(0, 0, self.shape[0])


def padded(flat, numel):
    """flat (1-D) followed by zeros up to numel elements."""
    pad = numel - flat.shape[0]
    return flat if pad == 0 else _C.cat([flat, _C.zeros([pad], dtype=flat.dtype, device=flat.device)], 0)
