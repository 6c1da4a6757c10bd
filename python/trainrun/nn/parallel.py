"""trainrun.nn.parallel.DistributedDataParallel, as PyTorch's: gradients
averaged over the ranks during backward (buckets all-reduced as they fill)."""
import contextlib

from trainrun import _C
from trainrun._autograd import no_grad
from trainrun.distributed.algorithms import default_hooks


class DistributedDataParallel(_C.distributed.DistributedDataParallel):
    """PyTorch's constructor: device_ids (None, or the one device the module is on), output_device and dim
    are the single-device forms (each process drives one device); static_graph is accepted (the reducer finds
    the ready order each iteration anyway); device_mesh (1-D) stands for its process group."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None):
        if device_ids is not None and len(list(device_ids)) > 1:
            raise ValueError(f"DistributedDataParallel: device_ids {list(device_ids)} names several devices; a "
                             "process drives one device (pass device_ids=[local_rank] or None)")
        if mixed_precision is not None or delay_all_reduce_named_params is not None or \
                param_to_hook_all_reduce is not None:
            raise NotImplementedError("DistributedDataParallel: mixed_precision, delay_all_reduce_named_params and "
                                      "param_to_hook_all_reduce are not supported")
        if device_mesh is not None:
            if process_group is not None:
                raise RuntimeError("Cannot specify both process_group and device_mesh arguments.")
            if device_mesh.ndim != 1:
                raise RuntimeError(f"Only 1D device mesh is supported, but got {device_mesh.ndim}D")
            process_group = device_mesh.get_group(0)
        super().__init__(module, process_group, 25.0 if bucket_cap_mb is None else bucket_cap_mb,
                         find_unused_parameters, gradient_as_bucket_view, broadcast_buffers)
        self.device_ids, self.output_device, self.dim, self.static_graph = device_ids, output_device, dim, \
            static_graph
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
        if hook is default_hooks.allreduce_hook:
            return  # what DDP does without a hook
        name = default_hooks.BUILT_IN.get(hook)
        if name is None:
            raise NotImplementedError("register_comm_hook: only the built-in hooks of "
                                      "trainrun.distributed.algorithms.default_hooks are supported "
                                      "(allreduce_hook, fp16_compress_hook, bf16_compress_hook)")
        super().register_comm_hook(name)
