"""torch.nn.SyncBatchNorm: batch norm whose training statistics are those of the whole global batch, every rank's
samples together. The mean and variance come from two all-reduces that autograd differentiates (the backward of a
sum over ranks all-reduces the gradient), so the input's gradient is the one single-process batch norm would give
on the concatenated batch. Outside training, or with one process, it is BatchNorm. convert_sync_batchnorm swaps
the BatchNorm layers of a model for it, keeping their parameters and running statistics."""
import trainrun
from trainrun import distributed as dist
from trainrun.autograd import Function
from trainrun.nn._module import Module
from trainrun.nn.parameter import Parameter


class _SumOverRanks(Function):
    @staticmethod
    def forward(ctx, t, group):
        ctx.group = group
        out = t.contiguous().clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class SyncBatchNorm(Module):
    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats, self.process_group = affine, track_running_stats, process_group
        options = {"device": device, "dtype": dtype}
        if affine:
            self.weight = Parameter(trainrun.ones(num_features, **options))
            self.bias = Parameter(trainrun.zeros(num_features, **options))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", trainrun.zeros(num_features, **options))
            self.register_buffer("running_var", trainrun.ones(num_features, **options))
            self.register_buffer("num_batches_tracked", trainrun.tensor(0, dtype=trainrun.int64, device=device))

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")

    def _group_size(self):
        if not dist.is_available() or not dist.is_initialized():
            return 1
        return dist.get_world_size(self.process_group)

    def forward(self, input):  # noqa: A002
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: expected {self.num_features} channels (dim 1), got input of shape "
                             f"{list(input.shape)}")
        use_batch_stats = self.training or not self.track_running_stats
        momentum = self.momentum
        if self.training and self.track_running_stats:
            with trainrun.no_grad():
                self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        shape = [1, self.num_features] + [1] * (input.dim() - 2)
        if not use_batch_stats:
            mean, var = self.running_mean, self.running_var
        else:
            dims = [0] + list(range(2, input.dim()))
            count = input.numel() // self.num_features
            if self._group_size() > 1:
                total = trainrun.tensor([float(count)], dtype=input.dtype, device=input.device)
                dist.all_reduce(total, group=self.process_group)
                count = int(total.item())
                mean = _SumOverRanks.apply(input.sum(dims), self.process_group) / count
                var = _SumOverRanks.apply((input - mean.reshape(shape)).pow(2).sum(dims), self.process_group) / count
            else:
                mean = input.mean(dims)
                var = (input - mean.reshape(shape)).pow(2).mean(dims)
            if count <= 1 and self.training:
                raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                                 f"{list(input.shape)}")
            if self.training and self.track_running_stats:
                with trainrun.no_grad():
                    unbiased = var * (count / (count - 1))
                    self.running_mean.mul_(1 - momentum).add_(mean.detach() * momentum)
                    self.running_var.mul_(1 - momentum).add_(unbiased.detach() * momentum)
        out = (input - mean.reshape(shape)) * trainrun.rsqrt(var.reshape(shape) + self.eps)
        if self.affine:
            out = out * self.weight.reshape(shape) + self.bias.reshape(shape)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm1d/2d/3d (itself included) replaced by a SyncBatchNorm holding its
        parameters, running statistics and mode."""
        from trainrun import nn
        norms = tuple(getattr(nn, n) for n in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d") if hasattr(nn, n))
        if isinstance(module, norms):
            args, kwargs = getattr(module, "_init_args", ((module.weight.shape[0],), {}))
            options = dict(zip(("eps", "momentum", "affine", "track_running_stats"), args[1:]), **kwargs)
            options = {k: v for k, v in options.items() if k in ("eps", "momentum", "affine", "track_running_stats")}
            synced = cls(args[0] if args else kwargs["num_features"], process_group=process_group, **options)
            state = module.state_dict()
            synced.load_state_dict(state, strict=False)
            synced.train(module.training)
            return synced
        for name, child in list(module.named_children()):
            converted = cls.convert_sync_batchnorm(child, process_group)
            if converted is not child:
                setattr(module, name, converted)
        return module


