"""torch.special.zeta(x, q): the Hurwitz zeta function sum_k (q + k)^-x, by Euler-Maclaurin summation as Cephes
(and so PyTorch) computes it: the first terms directly until q + k passes 9, then the integral of the tail and
twelve Bernoulli corrections. x = 1 and q a non-positive integer give inf; x < 1, or q < 0 with x not an
integer, give nan. Computed in float64, returned in the inputs' promoted floating dtype."""
import trainrun

# (2j)! / B_2j for j = 1..12: the Euler-Maclaurin corrections' denominators (Cephes' table).
_A = [12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
      -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
      -7.1661652561756670113e18]


def zeta(input, other, *, out=None):  # noqa: A002
    x = input if trainrun._C._is_cpp_tensor(input) else trainrun.tensor(float(input))
    q = other if trainrun._C._is_cpp_tensor(other) else trainrun.tensor(float(other))
    dtype = trainrun.promote_types(x.dtype, q.dtype)
    dtype = dtype if dtype.is_floating_point else trainrun.get_default_dtype()
    x, q = trainrun.broadcast_tensors(x.double(), q.double())
    terms = max(10, int(10 - float(q.min().item())) + 1) if q.numel() else 10  # (so that q + terms > 9 everywhere)
    total = trainrun.zeros_like(x)
    for k in range(terms):
        total = total + (q + k).pow(-x)
    w = q + (terms - 1)  # (the last point summed: the tail's integral starts there, half its term taken back)
    b = w.pow(-x)
    total = total + b * w / (x - 1) - 0.5 * b
    a, k = trainrun.ones_like(x), 0.0
    for denominator in _A:
        a = a * (x + k)
        b = b / w
        total = total + a * b / denominator
        k += 1.0
        a = a * (x + k)
        b = b / w
        k += 1.0
    far = (1 / (x - 1) + 1 / (2 * q)) * q.pow(1 - x)  # (q > 1e8: the sum's leading terms)
    result = trainrun.where(q > 1e8, far, total)
    inf, nan = float("inf"), float("nan")
    result = trainrun.where(x == 1, trainrun.full_like(x, inf), result)
    result = trainrun.where((q <= 0) & (q == q.floor()), trainrun.full_like(x, inf), result)
    result = trainrun.where((q < 0) & (x != x.floor()), trainrun.full_like(x, nan), result)
    result = trainrun.where(x < 1, trainrun.full_like(x, nan), result)
    result = result.to(dtype)
    if out is not None:
        out.resize_(result.shape).copy_(result)
        return out
    return result


def spherical_bessel_j0(input, *, out=None):  # noqa: A002
    """sin(x) / x (1 at 0; its series near 0, where the quotient loses digits)."""
    x = input if input.is_floating_point() else input.to(trainrun.get_default_dtype())
    small = x.abs() < 0.5
    x2 = x * x
    series = 1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72 * (1 - x2 / 110 * (1 - x2 / 156)))))
    safe = trainrun.where(small, trainrun.ones_like(x), x)
    result = trainrun.where(small, series, trainrun.sin(safe) / safe)
    if out is not None:
        out.resize_(result.shape).copy_(result)
        return out
    return result
