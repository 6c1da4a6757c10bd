"""Kernels written in Python for trainrun's own ops, as torch.library registers them for aten ops: while the
Library("aten", "IMPL") lives, the op's CPU kernel is the Python function (functions, methods and the op's
out= form reach it; autograd's formula and graph capture still run above it; calling the op inside the kernel
reaches the op's own kernel); other devices keep theirs; deleting the library restores the op; bad names and
keys are refused by name."""
import gc

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def test_a_cpu_kernel_replaces_the_ops_own_while_its_library_lives():
    calls = []

    def neg_cpu(x):
        calls.append(tuple(x.shape))
        return torch.neg(x)  # (the op itself, inside its kernel: the op's own)

    lib = torch.library.Library("aten", "IMPL")
    lib.impl("neg", neg_cpu, "CPU")
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    y = torch.neg(x)
    assert y.tolist() == [-1.0, 2.0] and calls == [(2,)]
    assert x.neg().tolist() == [-1.0, 2.0] and len(calls) == 2, "the method reaches the same kernel"
    (y * torch.tensor([3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [-3.0, -4.0], "autograd records and differentiates the op above the kernel"
    before = len(calls)
    assert torch.neg(torch.empty(3, device="meta")).shape == (3,) and len(calls) == before, \
        "meta tensors keep their kernel"
    compiled = torch.compile(lambda t: torch.neg(t) * 2)
    compiled(torch.ones(2)), compiled(torch.ones(2))
    assert compiled.replays == 1 and len(calls) == before + 2, "a replay dispatches the op again, to the kernel"
    with torch.no_grad():  # (where the pointwise ops fuse: one with a kernel from Python stays out of the loop)
        compiled = torch.compile(lambda t: torch.neg(t) * 2)
        assert torch.equal(compiled(torch.ones(2)), compiled(torch.ones(2)))
    assert compiled.replays == 1 and len(calls) == before + 4, "a fused replay still calls the kernel"
    del lib
    gc.collect()
    assert torch.neg(torch.ones(2)).tolist() == [-1.0, -1.0] and len(calls) == before + 4, \
        "the op's own kernel is back"


def test_pytorchs_div_example_with_keyword_only_arguments_and_out():
    seen = []

    def div_cpu(self, other, **kwargs):
        seen.append(sorted(kwargs))
        return self * (1 / other)

    lib = torch.library.Library("aten", "IMPL")
    lib.impl("div.Tensor", div_cpu, "CPU")
    a, b = torch.tensor([1.0, 3.0]), torch.tensor([4.0, 2.0])
    assert torch.allclose(torch.div(a, b), torch.tensor([0.25, 1.5])) and seen == [[]]
    out = torch.empty(2)
    torch.div(a, b, out=out)
    assert torch.allclose(out, torch.tensor([0.25, 1.5])) and seen == [[], []], "out= receives the result"
    lib._destroy()
    assert torch.div(a, b).tolist() == [0.25, 1.5] and len(seen) == 2


def test_the_impl_decorator_and_what_it_refuses():
    lib = torch.library.Library("aten", "IMPL")

    @torch.library.impl("aten::exp", "cpu", lib=lib)
    def exp_cpu(x):
        return x * 0 + 7

    assert torch.exp(torch.zeros(2)).tolist() == [7.0, 7.0]
    with pytest.raises(ValueError, match="'aten::no_such_op' is neither a custom op nor an op of trainrun's"):
        lib.impl("no_such_op", exp_cpu, "CPU")
    with pytest.raises(NotImplementedError, match="for a device \\(CPU, CUDA or Meta\\), not 'Autograd'"):
        lib.impl("sin", exp_cpu, "Autograd")
    del lib
    gc.collect()
    assert torch.exp(torch.zeros(2)).tolist() == [1.0, 1.0]


def test_a_kernel_gets_list_and_bool_arguments_as_python_values():
    seen = []

    def sum_cpu(x, dim, keepdim):
        seen.append((dim, keepdim))
        return torch.sum(x, dim, keepdim)  # (the op's own kernel)

    lib = torch.library.Library("aten", "IMPL")
    lib.impl("sum.dim_IntList", sum_cpu, "CPU")
    out = torch.ones(2, 3).sum(dim=[1], keepdim=True)
    assert out.tolist() == [[3.0], [3.0]] and seen == [([1], True)]
    lib._destroy()
