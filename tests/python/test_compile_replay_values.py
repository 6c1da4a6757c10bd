"""What a compiled call's replay must not take from its recording. Factories: arange, linspace, triu/tril
masks, eye and tensor(data) made during a recording replay their values (bitwise equal to eager's, in the
recorded ops), and a call that reads an allocation whose values no recorded op wrote runs eagerly, naming why
(before, a replay read an empty allocation: silently wrong values). The default dtype is a guard; draws made in
Python (randperm, a trainrun.Generator's) and Python reading a size that depends on the data (the length of
x[mask]) break the recording, so those calls run eagerly with eager's results."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402

FACTORIES = {
    "arange_int": lambda x: x + torch.arange(x.shape[0]),
    "arange_step": lambda x: x + torch.arange(-3, 3 * x.shape[0] - 3, 3),
    "arange_float": lambda x: x + torch.arange(0.1, 0.1 + 0.37 * x.shape[0] - 1e-3, 0.37),
    "arange_negative": lambda x: x + torch.arange(2.5, 2.5 - 0.25 * x.shape[0] + 1e-3, -0.25),
    "arange_half": lambda x: x.half() + torch.arange(3, 3 + 2 * x.shape[0], 2, dtype=torch.float16),
    "linspace": lambda x: x + torch.linspace(-1.3, 7.7, x.shape[0]),
    "linspace_double": lambda x: x.double() + torch.linspace(0, 1, x.shape[0], dtype=torch.float64),
    "triu": lambda x: x.unsqueeze(0).expand(x.shape[0], -1).triu(1),
    "tril": lambda x: x.unsqueeze(0).expand(x.shape[0], -1).tril(-1),
    "eye": lambda x: torch.eye(x.shape[0]) @ x,
    "tensor_data": lambda x: x[:3] * torch.tensor([1.5, -2.0, 4.0]),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_factory_in_a_compiled_call_replays_its_values_bitwise(name):
    fn = FACTORIES[name]
    compiled = torch.compile(fn)
    for n in (7, 7, 7, 11, 11):  # records at 7, replays twice; then 11
        x = torch.randn(n)
        assert torch.equal(compiled(x), fn(x)), n
    assert compiled.replays == 3
    assert all(hasattr(e, "graph") for e in compiled._cache.values()), compiled.explain()


def test_reading_an_allocation_no_recorded_op_wrote_runs_eagerly_naming_why():
    compiled = torch.compile(lambda x: (x, torch.empty(3)))
    compiled(torch.ones(2)), compiled(torch.ones(2))
    assert "output 1 reads a tensor the call made whose values no recorded op wrote" in compiled.explain()
    # an allocation an op writes whole (out=, copy_, fill_) is fine, and so is a view of it written into
    filled = torch.compile(lambda x: torch.add(x, 1, out=torch.empty(3)) + torch.empty(3).fill_(2))
    x = torch.ones(3)
    filled(x)
    assert torch.equal(filled(x), x + 3) and filled.replays == 1

    def halves(x):
        out = torch.empty(6)
        out[:3] = x
        out[3:] = x * 2
        return out

    compiled = torch.compile(halves)
    compiled(x)
    assert torch.equal(compiled(x), halves(x)) and compiled.replays == 1


def test_the_default_dtype_is_a_guard():
    compiled = torch.compile(lambda a: a + torch.ones(4))
    x = torch.randn(4)
    assert compiled(x).dtype == torch.float32
    torch.set_default_dtype(torch.float64)
    try:
        assert compiled(x).dtype == (x + torch.ones(4)).dtype == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
    assert compiled(x).dtype == torch.float32 and compiled.replays == 1


def test_draws_made_in_python_run_eagerly_so_each_call_draws_anew():
    perm = torch.compile(lambda: torch.randperm(8))
    gen = torch.Generator()
    drawn = torch.compile(lambda a: a + torch.rand(3, generator=gen))
    torch.manual_seed(0)
    gen.manual_seed(1)
    compiled = [perm(), perm(), drawn(torch.zeros(3)), drawn(torch.zeros(3))]
    torch.manual_seed(0)
    gen.manual_seed(1)
    eager = [torch.randperm(8), torch.randperm(8), torch.rand(3, generator=gen), torch.rand(3, generator=gen)]
    assert all(torch.equal(c, e) for c, e in zip(compiled, eager))
    assert not torch.equal(compiled[0], compiled[1]) and not torch.equal(compiled[2], compiled[3])
    assert "a draw from a trainrun.Generator" in perm.explain() and "runs eagerly" in drawn.explain()


def test_python_reading_a_data_dependent_size_runs_the_call_eagerly():
    masked = torch.compile(lambda x: x[x > 0] * 2)  # the size stays inside the ops: recorded, replayed
    counted = torch.compile(lambda x: torch.zeros(x[x > 0].shape[0]) + len(torch.nonzero(x)))
    for x in (torch.tensor([1., -2., 3.]), torch.tensor([1., -2., 3.]), torch.tensor([1., 2., 3.])):
        assert torch.equal(masked(x), x[x > 0] * 2)
        assert torch.equal(counted(x), torch.zeros(x[x > 0].shape[0]) + len(torch.nonzero(x)))
    assert masked.replays == 2
    assert "Python read the shape of a tensor whose shape depends on the data" in counted.explain()
