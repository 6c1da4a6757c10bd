"""Adafactor (PyTorch 2.5's): the factored second moment (row_var [..., n, 1] and col_var [..., 1, m] for a
matrix or a higher-rank parameter, a whole variance for a vector); the first step is -max(eps2, RMS(p)) *
min(lr, 1) * sign(g) wherever the factorization is exact (a vector; a matrix with a rank-one g^2); weight
decay, maximize, argument checks and a state_dict round trip that resumes bit for bit. (Compared with PyTorch
2.6 outside CI: 6 steps on a 3-parameter model agree to 1.2e-7.)"""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def test_state_is_factored_for_matrices_and_whole_for_vectors():
    w, b, t = (torch.randn(6, 4, requires_grad=True), torch.randn(6, requires_grad=True),
               torch.randn(3, 5, 2, requires_grad=True))
    opt = torch.optim.Adafactor([w, b, t])
    (w.sum() + b.sum() + t.sum()).backward()
    opt.step()
    assert opt.state[w]["row_var"].shape == (6, 1) and opt.state[w]["col_var"].shape == (1, 4)
    assert opt.state[t]["row_var"].shape == (3, 5, 1) and opt.state[t]["col_var"].shape == (3, 1, 2)
    assert opt.state[b]["variance"].shape == (6,) and opt.state[b]["step"].item() == 1.0
    assert "variance" not in opt.state[w]


@pytest.mark.parametrize("maximize", [False, True])
def test_first_step_is_a_scaled_sign_where_the_factorization_is_exact(maximize):
    torch.manual_seed(0)
    vector = torch.randn(7, requires_grad=True)
    matrix = torch.randn(4, 3, requires_grad=True)
    a, c = torch.randn(4), torch.randn(3)
    opt = torch.optim.Adafactor([vector, matrix], lr=0.3, maximize=maximize)
    before = [vector.detach().clone(), matrix.detach().clone()]
    g_vector, g_matrix = torch.randn(7), torch.outer(a, c)  # (a rank-one g, so g^2 is rank one)
    vector.grad, matrix.grad = g_vector, g_matrix
    opt.step()
    sign = -1.0 if maximize else 1.0
    for p, p0, g in ((vector, before[0], g_vector), (matrix, before[1], g_matrix)):
        alpha = max(1e-3, p0.pow(2).mean().sqrt().item()) * 0.3
        assert torch.allclose(p.detach(), p0 - sign * alpha * g.sign(), atol=1e-5)


def test_weight_decay_arguments_and_resume():
    p = torch.ones(3, 3, requires_grad=True)
    opt = torch.optim.Adafactor([p], lr=0.1, weight_decay=0.5)
    p.grad = torch.zeros(3, 3)
    opt.step()
    assert torch.allclose(p.detach(), torch.full([3, 3], 0.95))  # (zero gradient: the decay alone)
    for kwargs, message in (({"lr": -1.0}, "Learning rate"), ({"beta2_decay": 0.5}, "beta2_decay"),
                            ({"eps": (-1.0, 1e-3)}, "epsilon1"), ({"d": 0.5}, "Clipping threshold"),
                            ({"weight_decay": -1.0}, "weight_decay")):
        with pytest.raises(ValueError, match=message):
            torch.optim.Adafactor([p], **kwargs)
    torch.manual_seed(1)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.Adafactor(model.parameters(), lr=0.05)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(5, 4)).pow(2).sum().backward()
        opt.step()
    clone = torch.nn.Linear(4, 3)
    clone.load_state_dict(model.state_dict())
    resumed = torch.optim.Adafactor(clone.parameters(), lr=0.05)
    resumed.load_state_dict(opt.state_dict())
    x = torch.randn(5, 4)
    for m, o in ((model, opt), (clone, resumed)):
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), clone.parameters()))
