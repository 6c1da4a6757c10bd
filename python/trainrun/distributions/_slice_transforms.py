"""CatTransform and StackTransform, as torch.distributions.transforms': transforms applied to slices of a tensor
along a dim (consecutive runs of it, or each index of it), their results joined by torch.cat or torch.stack."""
import trainrun
from trainrun.distributions import constraints
from trainrun.distributions.transforms import Transform, _sum_rightmost


class CatTransform(Transform):
    """Transforms applied to consecutive slices along `dim` (lengths[i] entries to tseq[i]), as torch.cat joins
    them."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("CatTransform: tseq must hold Transforms")
        super().__init__(cache_size)
        self.transforms = [t.with_cache(cache_size) if cache_size else t for t in tseq]
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: {len(self.lengths)} lengths for {len(self.transforms)} transforms")
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _pieces(self, z):
        if z.shape[self.dim] != self.length:
            raise ValueError(f"CatTransform: dim {self.dim} has {z.shape[self.dim]} entries; the transforms take "
                             f"{self.length}")
        start = 0
        for transform, length in zip(self.transforms, self.lengths):
            yield transform, z.narrow(self.dim, start, length)
            start += length

    def _call(self, x):
        return trainrun.cat([t(piece) for t, piece in self._pieces(x)], self.dim)

    def _inverse(self, y):
        return trainrun.cat([t.inv(piece) for t, piece in self._pieces(y)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = []
        for (t, xs), (_, ys) in zip(self._pieces(x), self._pieces(y)):
            terms.append(_sum_rightmost(t.log_abs_det_jacobian(xs, ys), self.event_dim - t.event_dim))
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        return trainrun.cat(terms, dim) if dim < 0 else sum(terms)  # (dim inside an event: the terms add up)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """tseq[i] applied to x.select(dim, i), the results stacked along dim."""

    def __init__(self, tseq, dim=0, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("StackTransform: tseq must hold Transforms")
        super().__init__(cache_size)
        self.transforms = [t.with_cache(cache_size) if cache_size else t for t in tseq]
        self.dim = dim

    def with_cache(self, cache_size=1):
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, z):
        if z.shape[self.dim] != len(self.transforms):
            raise ValueError(f"StackTransform: dim {self.dim} has {z.shape[self.dim]} entries for "
                             f"{len(self.transforms)} transforms")
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x):
        return trainrun.stack([t(piece) for t, piece in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        return trainrun.stack([t.inv(piece) for t, piece in zip(self.transforms, self._slices(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        return trainrun.stack([t.log_abs_det_jacobian(xs, ys) for t, xs, ys in
                               zip(self.transforms, self._slices(x), self._slices(y))], self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)
