"""nn.CrossMapLRN2d: Lua Torch's local response normalization across channels, kept by PyTorch for old models.
out = x * (k + alpha / size * s)^-beta with s a running sum of squares over channels, computed exactly as
PyTorch's (legacy) code accumulates it: channel c sums channels 0 .. c + pre - 1 while c <= pre (pre =
(size - 1) // 2 + 1), and later drops the channels 1 .. c - pre but never channel 0. That window differs from
LocalResponseNorm's, so the two give different values; this one gives PyTorch's. The gradient is this forward's
own (autograd's); PyTorch's hand-written backward is that of a symmetric window, so its gradients differ."""
import trainrun
from trainrun.nn._module import Module


def cross_map_lrn2d(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    if input.dim() != 4:
        raise ValueError(f"CrossMapLRN2d: expected a 4-D input (N, C, H, W), got {input.dim()}-D")
    channels = input.shape[1]
    pre = (size - 1) // 2 + 1
    squares = input * input
    running = trainrun.cat([trainrun.zeros_like(squares[:, :1]), squares.cumsum(1)], 1)  # running[i] = sum of channels < i
    sums = []
    for c in range(channels):
        hi = min(c + pre - 1, channels - 1)
        if c <= pre:
            total = running[:, hi + 1] - running[:, 0]
        else:  # (channel 0 stays in: the legacy loop never removes it)
            total = squares[:, 0] + running[:, hi + 1] - running[:, c - pre + 1]
        sums.append(total)
    scale = trainrun.stack(sums, 1) * (alpha / size) + k
    return input * scale.pow(-beta)


class CrossMapLRN2d(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):  # noqa: A002
        return cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
