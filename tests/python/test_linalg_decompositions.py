"""torch.linalg's LU family (lu_factor, lu, lu_solve, *_ex, torch.lu/lu_unpack/lu_solve), eig/eigvals,
tensorinv/tensorsolve, cholesky_solve/cholesky_inverse, LinAlgError for what LAPACK refuses, and the gradients
of cholesky, eigh and eigvalsh, against PyTorch 1.13."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402


def _close(ours, theirs, atol=1e-8):
    assert np.allclose(np.asarray(ours.detach().numpy(), dtype=np.float64),
                       np.asarray(theirs.detach().numpy(), dtype=np.float64), atol=atol), (ours, theirs)


def _matrices(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


@needs_torch
def test_lu_family_matches():
    a = _matrices(0, 3, 4, 4)
    ours, theirs = torch.linalg.lu_factor(torch.tensor(a)), peer.linalg.lu_factor(peer.tensor(a))
    _close(ours.LU, theirs.LU)
    assert ours.pivots.dtype == torch.int32 and ours.pivots.tolist() == theirs.pivots.tolist()
    for mine, its in zip(torch.linalg.lu(torch.tensor(a)), peer.linalg.lu(peer.tensor(a))):
        _close(mine, its)
    wide = _matrices(1, 3, 5)
    for mine, its in zip(torch.linalg.lu(torch.tensor(wide)), peer.linalg.lu(peer.tensor(wide))):
        _close(mine, its)
    b = _matrices(2, 3, 4, 2)
    _close(torch.linalg.lu_solve(ours.LU, ours.pivots, torch.tensor(b)),
           peer.linalg.lu_solve(theirs.LU, theirs.pivots, peer.tensor(b)))
    _close(torch.linalg.lu_solve(ours.LU, ours.pivots, torch.tensor(b), adjoint=True),
           peer.linalg.lu_solve(theirs.LU, theirs.pivots, peer.tensor(b), adjoint=True))
    bt = np.swapaxes(b, -1, -2).copy()
    _close(torch.linalg.lu_solve(ours.LU, ours.pivots, torch.tensor(bt), left=False),
           peer.linalg.lu_solve(theirs.LU, theirs.pivots, peer.tensor(bt), left=False))
    packed, pivots = torch.lu(torch.tensor(a))
    _close(torch.lu_solve(torch.tensor(b), packed, pivots), peer.lu_solve(peer.tensor(b), theirs.LU, theirs.pivots))
    for mine, its in zip(torch.lu_unpack(packed, pivots), peer.lu_unpack(theirs.LU, theirs.pivots)):
        _close(mine, its)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    info = torch.linalg.lu_factor_ex(torch.tensor(singular)).info
    assert info.item() == peer.linalg.lu_factor_ex(peer.tensor(singular)).info.item() == 2


@needs_torch
def test_linalg_errors_are_pytorchs():
    assert issubclass(torch.linalg.LinAlgError, RuntimeError)
    with pytest.raises(torch.linalg.LinAlgError, match="linalg.inv: .*singular"):
        torch.linalg.inv(torch.zeros(2, 2))
    with pytest.raises(torch.linalg.LinAlgError, match="linalg.cholesky: .*not positive-definite"):
        torch.linalg.cholesky(-torch.eye(2))
    with pytest.raises(torch.linalg.LinAlgError, match="linalg.solve"):
        torch.linalg.solve(torch.zeros(2, 2), torch.ones(2))


@needs_torch
def test_eig_tensor_inverses_and_cholesky_helpers_match():
    a = _matrices(3, 4, 4)
    mine = torch.linalg.eigvals(torch.tensor(a))
    its = peer.linalg.eigvals(peer.tensor(a)).numpy()
    ours = mine.real.numpy() + 1j * mine.imag.numpy()
    assert np.allclose(np.sort_complex(ours), np.sort_complex(its))
    values, vectors = torch.linalg.eig(torch.tensor(a))
    v = vectors.real.numpy() + 1j * vectors.imag.numpy()
    w = values.real.numpy() + 1j * values.imag.numpy()
    assert np.allclose(a @ v, v * w)
    t = _matrices(4, 4, 6, 8, 3)
    _close(torch.linalg.tensorinv(torch.tensor(t)), peer.linalg.tensorinv(peer.tensor(t)))
    big, rhs = _matrices(5, 2, 3, 6), _matrices(6, 2, 3)
    _close(torch.linalg.tensorsolve(torch.tensor(big), torch.tensor(rhs)),
           peer.linalg.tensorsolve(peer.tensor(big), peer.tensor(rhs)))
    spd = a @ a.T + 4 * np.eye(4)
    low = np.linalg.cholesky(spd)
    b = _matrices(7, 4, 2)
    for upper, factor in ((False, low), (True, low.T.copy())):
        _close(torch.cholesky_solve(torch.tensor(b), torch.tensor(factor), upper),
               peer.cholesky_solve(peer.tensor(b), peer.tensor(factor), upper))
        _close(torch.cholesky_inverse(torch.tensor(factor), upper),
               peer.cholesky_inverse(peer.tensor(factor), upper))


@needs_torch
@pytest.mark.parametrize("which", ["cholesky", "cholesky upper", "eigh", "eigvalsh"])
def test_symmetric_factorization_gradients_match(which):
    m = _matrices(8, 2, 4, 4)
    spd = m @ np.swapaxes(m, -1, -2) + 4 * np.eye(4)
    weights = [_matrices(9, 2, 4, 4), _matrices(10, 2, 4)]

    def run(lib, x):
        if which.startswith("cholesky"):
            out = lib.linalg.cholesky(x, upper=which.endswith("upper"))
            return (out * lib.tensor(weights[0])).sum()
        if which == "eigh":
            values, vectors = lib.linalg.eigh(x)
            # (an eigenvector's sign is arbitrary: differentiate what does not depend on it)
            return (values * lib.tensor(weights[1])).sum() + ((vectors * vectors) * lib.tensor(weights[0])).sum()
        return (lib.linalg.eigvalsh(x) * lib.tensor(weights[1])).sum()
    x, px = torch.tensor(spd, requires_grad=True), peer.tensor(spd, requires_grad=True)
    _close(run(torch, x), run(peer, px))
    run(torch, x).backward()
    run(peer, px).backward()
    _close(x.grad, px.grad, atol=1e-7)
