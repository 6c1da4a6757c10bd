"""trainrun.nn.parallel.DistributedDataParallel, as PyTorch's: gradients
averaged over the ranks during backward (buckets all-reduced as they fill)."""
import contextlib

from trainrun import _C
from trainrun._autograd import no_grad
from trainrun.distributed.algorithms import default_hooks


class DistributedDataParallel(_C.distributed.DistributedDataParallel):
    def __init__(self, module, process_group=None, bucket_cap_mb=25.0, find_unused_parameters=False,
                 gradient_as_bucket_view=False, broadcast_buffers=True):
        super().__init__(module, process_group, bucket_cap_mb, find_unused_parameters, gradient_as_bucket_view,
                         broadcast_buffers)
        self.module = module  # the Python module (and its forward) lives as long as this
        self._process_group, self._broadcast_buffers = process_group, broadcast_buffers

    def forward(self, *inputs, **kwargs):
        """Runs the wrapped module on every argument it takes. Tensors go through C++ (which broadcasts
        rank 0's buffers, then calls the module, its Python hooks included); calls with keywords or other
        values broadcast the buffers here, then call the module."""
        if inputs and not kwargs and all(isinstance(a, _C.Tensor) for a in inputs):
            return super().forward(*inputs)
        if self._broadcast_buffers and self.training:
            from trainrun import distributed as dist
            with no_grad():
                for _, buffer in self.module.named_buffers():
                    dist.broadcast(buffer, 0, group=self._process_group)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate locally; the next one outside syncs it all."""
        previous = self._sync()
        self._set_sync(False)
        try:
            yield
        finally:
            self._set_sync(previous)

    def register_comm_hook(self, state, hook):
        """PyTorch's signature; the built-in compression hooks of
        trainrun.distributed.algorithms.default_hooks run in C++."""
        name = default_hooks.BUILT_IN.get(hook)
        if name is None:
            raise NotImplementedError("register_comm_hook: only the built-in hooks of "
                                      "trainrun.distributed.algorithms.default_hooks are supported "
                                      "(fp16_compress_hook, bf16_compress_hook)")
        super().register_comm_hook(name)
