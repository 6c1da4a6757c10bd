"""torch.special's orthogonal polynomials (Chebyshev T/U/V/W and shifted, Hermite H/He, Laguerre, Legendre),
zeta (Hurwitz) and spherical_bessel_j0: against PyTorch 1.13 on a grid of x and degrees (negative degrees give
0), against closed forms (T_n(cos t) = cos nt, U_n(cos t) = sin((n+1)t)/sin t, zeta(2, 1) = pi^2/6), and zeta's
poles and domain."""
import math

import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402

POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
XS = [-2.5, -1.0, -0.7, 0.0, 0.3, 0.99, 1.0, 1.7]
NS = [-2, 0, 1, 2, 3, 5, 8, 12]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_match_pytorch(name):
    ref = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")
    grid_x = [[x for _ in NS] for x in XS]
    grid_n = [[float(n) for n in NS] for _ in XS]
    ours = np.array(getattr(torch.special, name)(torch.tensor(grid_x, dtype=torch.float64),
                                                 torch.tensor(grid_n, dtype=torch.float64)).tolist())
    theirs = getattr(ref.special, name)(ref.tensor(grid_x, dtype=ref.float64),
                                        ref.tensor(grid_n, dtype=ref.float64)).numpy()
    assert np.allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_polynomials_closed_forms_and_broadcasting():
    t = torch.linspace(0.1, 3.0, 7, dtype=torch.float64)
    for n in (0, 3, 7):
        assert torch.allclose(torch.special.chebyshev_polynomial_t(t.cos(), n), (n * t).cos(), atol=1e-12)
        assert torch.allclose(torch.special.chebyshev_polynomial_u(t.cos(), n), ((n + 1) * t).sin() / t.sin(),
                              atol=1e-10)
    x = torch.tensor([[0.5], [2.0]])
    degrees = torch.tensor([0, 1, 2, 3])
    out = torch.special.legendre_polynomial_p(x, degrees)
    assert out.shape == (2, 4) and torch.allclose(out[0], torch.tensor([1.0, 0.5, -0.125, -0.4375]))
    assert torch.special.hermite_polynomial_h(torch.tensor(2.0), 3).item() == 40.0  # 8x^3 - 12x
    assert torch.special.laguerre_polynomial_l(torch.tensor(0.0), torch.tensor(-1)).item() == 0.0


def test_zeta():
    assert abs(torch.special.zeta(torch.tensor(2.0, dtype=torch.float64), 1.0).item() - math.pi ** 2 / 6) < 1e-15
    x = torch.tensor([1.0, 0.5, 2.0, 2.5, 3.0, 2.0], dtype=torch.float64)
    q = torch.tensor([1.0, 1.0, -1.0, -0.5, -1.5, 1e9], dtype=torch.float64)
    got = torch.special.zeta(x, q).tolist()
    assert got[0] == math.inf and math.isnan(got[1]) and got[2] == math.inf and math.isnan(got[3])
    assert math.isfinite(got[4]) and abs(got[5] - (1e-9 + 0.5e-18)) < 1e-22  # (1/q + 1/(2q^2) for large q)
    ref = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")
    xs = [1.5, 2.0, 2.5, 3.0, 4.0, 7.5, 20.0, 3.0, 2.0, 1.01, 60.0]
    qs = [0.3, 1.0, 2.0, -1.5, -2.5, 0.01, 3.0, -0.5, 50.0, 0.5, 1.0]
    ours = np.array(torch.special.zeta(torch.tensor(xs, dtype=torch.float64),
                                       torch.tensor(qs, dtype=torch.float64)).tolist())
    theirs = ref.special.zeta(ref.tensor(xs, dtype=ref.float64), ref.tensor(qs, dtype=ref.float64)).numpy()
    assert np.allclose(ours, theirs, rtol=1e-13)


def test_spherical_bessel_j0_and_modified_bessel_names():
    x = torch.tensor([0.0, 1e-5, 0.3, 0.49, 0.51, 3.0, -2.0, 100.0], dtype=torch.float64)
    expected = [1.0] + [math.sin(v) / v for v in x.tolist()[1:]]
    assert np.allclose(torch.special.spherical_bessel_j0(x).tolist(), expected, rtol=1e-15, atol=1e-16)
    y = torch.tensor([0.5, -3.0])
    assert torch.equal(torch.special.modified_bessel_i0(y), torch.special.i0(y))
    assert torch.equal(torch.special.modified_bessel_i1(y), torch.special.i1(y))
