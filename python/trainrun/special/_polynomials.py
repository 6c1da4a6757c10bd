"""The orthogonal polynomials of torch.special, evaluated at x for degree n (x and n broadcast; n is truncated
to an integer and a negative degree gives 0, as PyTorch's): Chebyshev T, U, V, W and their shifted forms
(on [0, 1]), Hermite H (physicists') and He (probabilists'), Laguerre L and Legendre P. Each is its three-term
recurrence run to the largest degree asked for, every element keeping the value at its own degree; computed in
the inputs' promoted dtype."""
import trainrun


def _operands(input, n):  # noqa: A002
    x = input if trainrun._C._is_cpp_tensor(input) else trainrun.tensor(float(input))
    degree = n if trainrun._C._is_cpp_tensor(n) else trainrun.tensor(n)
    if not x.is_floating_point():
        x = x.to(trainrun.get_default_dtype())
    degree = degree.to(x.dtype).trunc()
    x, degree = trainrun.broadcast_tensors(x, degree)
    return x, degree


def _recurrence(input, n, first, step):  # noqa: A002
    """p_0 = 1, p_1 = first(x), p_{k+1} = step(k, x, p_k, p_{k-1}); each element at its own degree n."""
    x, degree = _operands(input, n)
    top = int(degree.max().item()) if degree.numel() else 0
    previous, current = trainrun.ones_like(x), first(x)
    result = trainrun.where(degree == 0, previous, trainrun.zeros_like(x))
    result = trainrun.where(degree == 1, current, result)
    for k in range(1, top):
        previous, current = current, step(k, x, current, previous)
        result = trainrun.where(degree == k + 1, current, result)
    return result


def _into(out, result):
    if out is None:
        return result
    out.resize_(result.shape).copy_(result)
    return out


def chebyshev_polynomial_t(input, n, *, out=None):  # noqa: A002
    return _into(out, _recurrence(input, n, lambda x: x, lambda k, x, p, q: 2 * x * p - q))


def chebyshev_polynomial_u(input, n, *, out=None):  # noqa: A002
    return _into(out, _recurrence(input, n, lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - q))


def chebyshev_polynomial_v(input, n, *, out=None):  # noqa: A002
    return _into(out, _recurrence(input, n, lambda x: 2 * x - 1, lambda k, x, p, q: 2 * x * p - q))


def chebyshev_polynomial_w(input, n, *, out=None):  # noqa: A002
    return _into(out, _recurrence(input, n, lambda x: 2 * x + 1, lambda k, x, p, q: 2 * x * p - q))


def _shifted(polynomial):
    def shifted(input, n, *, out=None):  # noqa: A002
        x = input if trainrun._C._is_cpp_tensor(input) else trainrun.tensor(float(input))
        return polynomial(2 * x - 1, n, out=out)
    shifted.__name__ = "shifted_" + polynomial.__name__
    shifted.__doc__ = f"{polynomial.__name__} on [0, 1]: at 2x - 1."
    return shifted


shifted_chebyshev_polynomial_t = _shifted(chebyshev_polynomial_t)
shifted_chebyshev_polynomial_u = _shifted(chebyshev_polynomial_u)
shifted_chebyshev_polynomial_v = _shifted(chebyshev_polynomial_v)
shifted_chebyshev_polynomial_w = _shifted(chebyshev_polynomial_w)


def hermite_polynomial_h(input, n, *, out=None):  # noqa: A002
    """Physicists' Hermite: H_{k+1} = 2x H_k - 2k H_{k-1}."""
    return _into(out, _recurrence(input, n, lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - 2 * k * q))


def hermite_polynomial_he(input, n, *, out=None):  # noqa: A002
    """Probabilists' Hermite: He_{k+1} = x He_k - k He_{k-1}."""
    return _into(out, _recurrence(input, n, lambda x: x, lambda k, x, p, q: x * p - k * q))


def laguerre_polynomial_l(input, n, *, out=None):  # noqa: A002
    """L_{k+1} = ((2k + 1 - x) L_k - k L_{k-1}) / (k + 1)."""
    return _into(out, _recurrence(input, n, lambda x: 1 - x,
                                  lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1)))


def legendre_polynomial_p(input, n, *, out=None):  # noqa: A002
    """P_{k+1} = ((2k + 1) x P_k - k P_{k-1}) / (k + 1)."""
    return _into(out, _recurrence(input, n, lambda x: x,
                                  lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1)))


__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p"]
