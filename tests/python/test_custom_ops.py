"""trainrun.library's custom operators as PyTorch 2.4+ users write them:
schemas inferred from annotations (the strings PyTorch 2.6 prints for the
same functions), kernels per device, fakes on meta tensors, autograd
formulas with setup_context, declared and undeclared mutation, aliasing
outputs, trainrun.ops.<ns>.<name>, opcheck, and the refusals by name."""
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun import Tensor  # noqa: E402


def test_schemas_are_inferred_as_pytorch_writes_them():
    def f(x: Tensor, y: Optional[Tensor], n: int, f: float, b: bool, l: List[Tensor], li: Sequence[int], s: str,
          d: torch.dtype, dev: torch.device, on: Optional[int] = None, k: float = 2.0) -> Tuple[Tensor, Tensor]:
        pass

    def g(x: Tensor) -> None:
        pass

    def h(x: Tensor) -> List[Tensor]:
        pass

    # PyTorch 2.6's torch.library.infer_schema on the same functions:
    assert torch.library.infer_schema(f, mutates_args=("x",)) == (
        "(Tensor(a0!) x, Tensor? y, SymInt n, float f, bool b, Tensor[] l, SymInt[] li, str s, ScalarType d, "
        "Device dev, SymInt? on=None, float k=2.0) -> (Tensor, Tensor)")
    assert torch.library.infer_schema(g, mutates_args="unknown") == "(Tensor(a0!) x) -> ()"
    assert torch.library.infer_schema(h, mutates_args=()) == "(Tensor x) -> Tensor[]"

    def untyped(x):
        pass
    with pytest.raises(ValueError, match="Parameter x must have a type annotation"):
        torch.library.infer_schema(untyped, mutates_args=())

    def no_return(x: Tensor):
        pass
    with pytest.raises(ValueError, match="No return type annotation"):
        torch.library.infer_schema(no_return, mutates_args=())
    with pytest.raises(ValueError, match=r"\['y'\] in mutates_args were not found"):
        torch.library.infer_schema(g, mutates_args=("y",))


def _numpy_sin_op(name):
    """The tutorial's op: a kernel PyTorch cannot see into (NumPy), a fake and a formula."""
    @torch.library.custom_op(name, mutates_args=())
    def numpy_sin(x: Tensor) -> Tensor:
        return torch.from_numpy(np.sin(x.numpy()))

    @numpy_sin.register_fake
    def _(x):
        return torch.empty_like(x)

    def setup_context(ctx, inputs, output):
        x, = inputs
        ctx.save_for_backward(x)

    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * x.cos()

    numpy_sin.register_autograd(backward, setup_context=setup_context)
    return numpy_sin


def test_a_custom_op_computes_trains_and_is_reachable_under_trainrun_ops():
    numpy_sin = _numpy_sin_op("trop_train::numpy_sin")
    x = torch.randn(5, requires_grad=True)
    y = numpy_sin(x)
    assert torch.allclose(y, x.detach().sin())
    y.sum().backward()
    assert torch.allclose(x.grad, x.detach().cos())
    assert repr(torch.ops.trop_train.numpy_sin) == "trop_train.numpy_sin"
    assert torch.ops.trop_train.numpy_sin.default._schema == "trop_train::numpy_sin(Tensor x) -> Tensor"
    assert torch.allclose(torch.ops.trop_train.numpy_sin.default(x), y)
    meta = numpy_sin(torch.empty(2, 3, device="meta"))
    assert meta.device.type == "meta" and list(meta.shape) == [2, 3]
    # Inside a model trained by an optimizer: the same steps as the built-in sin.
    torch.manual_seed(0)
    a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    b.load_state_dict(a.state_dict())
    opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
    for _ in range(3):
        batch = torch.randn(8, 4)
        for model, opt, sin in ((a, opt_a, numpy_sin), (b, opt_b, torch.sin)):
            opt.zero_grad()
            sin(model(batch)).pow(2).sum().backward()
            opt.step()
    assert torch.allclose(a.weight, b.weight, atol=1e-6)
    assert torch.library.opcheck(numpy_sin, (torch.randn(3, requires_grad=True),)) == {
        "test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS", "test_faketensor": "SUCCESS"}


def test_kernels_per_device_and_the_gradient_of_several_inputs():
    @torch.library.custom_op("trop_dev::scaled_add", mutates_args=(), device_types="cpu")
    def scaled_add(x: Tensor, y: Tensor, alpha: float = 1.0) -> Tensor:
        return x + alpha * y

    def backward(ctx, grad):
        return grad, grad * ctx.alpha, None

    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[2]
        assert ctx.needs_input_grad == (True, False, False)

    scaled_add.register_autograd(backward, setup_context=setup_context)
    x, y = torch.ones(3, requires_grad=True), torch.full([3], 2.0)
    out = scaled_add(x, y, alpha=3.0)
    assert out.tolist() == [7.0, 7.0, 7.0]
    out.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="no fake impl registered for <CustomOpDef\\(trop_dev::scaled_add\\)>"):
        scaled_add(torch.empty(3, device="meta"), torch.empty(3, device="meta"))

    calls = []

    @scaled_add.register_kernel("cpu")
    def _(x, y, alpha=1.0):
        calls.append("cpu kernel")
        return x - alpha * y  # a different kernel, to see it chosen

    assert scaled_add(torch.ones(2), torch.ones(2)).tolist() == [0.0, 0.0] and calls == ["cpu kernel"]


def test_mutation_is_declared_or_refused():
    @torch.library.custom_op("trop_mut::inc", mutates_args={"x"})
    def inc(x: Tensor, n: int) -> None:
        x.add_(n)

    z = torch.zeros(2)
    assert inc(z, 2) is None and z.tolist() == [2.0, 2.0]
    assert inc._schema == "(Tensor(a0!) x, SymInt n) -> ()"
    with pytest.raises(RuntimeError, match="mutates its inputs \\(x\\) cannot have an autograd formula"):
        inc.register_autograd(lambda ctx, g: g)

    @torch.library.custom_op("trop_mut::sneaky", mutates_args=())
    def sneaky(x: Tensor) -> Tensor:
        x.mul_(2)
        return x.clone()

    with pytest.raises(RuntimeError, match="test_schema failed: the kernel wrote to its argument 'x', which is "
                                           "not in mutates_args"):
        torch.library.opcheck(sneaky, (torch.ones(2),))
    assert torch.library.opcheck(inc, (torch.zeros(2), 1), test_utils=("test_schema",)) == {"test_schema": "SUCCESS"}


def test_refusals_name_the_op_and_what_was_wrong():
    @torch.library.custom_op("trop_bad::alias", mutates_args=())
    def alias(x: Tensor) -> Tensor:
        return x

    with pytest.raises(RuntimeError, match="must not also be an input to this custom operator"):
        alias(torch.zeros(2))

    @torch.library.custom_op("trop_bad::view", mutates_args=())
    def view(x: Tensor) -> Tensor:
        return x.view(-1)

    with pytest.raises(RuntimeError, match="may not alias any inputs"):
        view(torch.zeros(2, 2))

    @torch.library.custom_op("trop_bad::nograd", mutates_args=())
    def nograd(x: Tensor) -> Tensor:
        return x * 2

    y = nograd(torch.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="backward through trop_bad.nograd.default but no autograd formula"):
        y.sum().backward()
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor' for argument 'x' but instead found "
                                           "type 'int'"):
        nograd(3)
    with pytest.raises(TypeError, match="trop_bad::nograd\\(\\): missing a required argument: 'x'"):
        nograd()
    with pytest.raises(RuntimeError, match="already registered"):
        torch.library.custom_op("trop_bad::nograd", mutates_args=())(nograd._init_fn)
    with pytest.raises(ValueError, match="must be 'namespace::name'"):
        torch.library.custom_op("nonamespace", mutates_args=())
    with pytest.raises(AttributeError, match="no custom op 'trop_bad::missing' is registered"):
        torch.ops.trop_bad.missing

    @torch.library.custom_op("trop_bad::only_cuda", mutates_args=(), device_types="cuda")
    def only_cuda(x: Tensor) -> Tensor:
        return x.clone()

    with pytest.raises(NotImplementedError, match="no kernel for this device; it has kernels for 'cuda'"):
        only_cuda(torch.ones(1))

    @torch.library.custom_op("trop_bad::wrong_fake", mutates_args=())
    def doubled(x: Tensor) -> Tensor:
        return torch.cat([x, x])

    doubled.register_fake(lambda x: torch.empty_like(x))
    with pytest.raises(RuntimeError, match=r"test_faketensor failed: output 0: the kernel gives .* \[4\], the fake "
                                           r".* \[2\]"):
        torch.library.opcheck(doubled, (torch.ones(2),))


def test_aten_ops_are_reachable_by_name():
    a, b = torch.ones(2), torch.full([2], 3.0)
    assert torch.ops.aten.add.Tensor(a, b).tolist() == [4.0, 4.0]
    assert torch.ops.aten.mul.default(a, b).tolist() == [3.0, 3.0]
    assert torch.ops.aten.relu(torch.tensor([-1.0, 1.0])).tolist() == [0.0, 1.0]


def test_an_output_marked_non_differentiable_has_no_history():
    @torch.library.custom_op("trop_nd::with_index", mutates_args=())
    def with_index(x: Tensor) -> Tuple[Tensor, Tensor]:
        return x * 2, x.argmax().to(torch.float32)

    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])

    with_index.register_autograd(lambda ctx, g, g_index: (g * 2,), setup_context=setup_context)
    x = torch.tensor([1.0, 3.0], requires_grad=True)
    doubled, index = with_index(x)
    assert doubled.requires_grad and not index.requires_grad and index.item() == 1.0
    doubled.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_a_custom_op_inside_a_compiled_training_step_is_one_node_of_the_graph():
    """The op's NumPy kernel is opaque to the recording (one node, replayed by calling the op again); its autograd
    formula, in trainrun ops, is part of the recorded backward."""
    numpy_sin = _numpy_sin_op("trop_compile::numpy_sin")

    @torch.library.custom_op("trop_compile::scale", mutates_args=())
    def scale(x: Tensor, factor: float) -> Tensor:
        return x * factor

    scale.register_autograd(lambda ctx, g: (g * ctx.factor, None),
                            setup_context=lambda ctx, inputs, output: setattr(ctx, "factor", inputs[1]))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return scale(numpy_sin(self.lin(x)), 3.0)

    torch.manual_seed(0)
    model, reference = Model(), torch.nn.Linear(4, 4)
    reference.load_state_dict(model.lin.state_dict())
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        batch = torch.randn(8, 4)
        opt.zero_grad()
        out = compiled(batch)
        out.pow(2).sum().backward()
        opt.step()
        opt_ref.zero_grad()
        (torch.sin(reference(batch)) * 3.0).pow(2).sum().backward()
        opt_ref.step()
        assert torch.allclose(model.lin.weight, reference.weight, atol=1e-6)
    explained = compiled.explain()
    assert compiled._compiled.replays == 2, explained
    assert "trop_compile::numpy_sin(" in explained and "(external)" in explained, explained
    assert "backward recorded" in explained and out.grad_fn.name() == "CompiledFunctionBackward", explained


def test_the_schema_first_library_api_defines_implements_and_removes_ops():
    import gc
    lib = torch.library.Library("schemalib", "DEF")
    assert lib.define("scale(Tensor x, float s=2.0, *, int[] dims=[0, 1]) -> Tensor") == "scale"
    op = torch.ops.schemalib.scale
    assert op.default._schema == "schemalib::scale(Tensor x, float s=2.0, *, int[] dims=[0, 1]) -> Tensor"
    with pytest.raises(NotImplementedError, match="schemalib::scale: no kernel is registered"):
        op(torch.ones(2))
    lib.impl("scale", lambda x, s=2.0, dims=(0, 1): x * s, "CPU")
    assert torch.equal(op(torch.ones(2)), torch.full((2,), 2.0))
    assert torch.equal(op(torch.ones(2), 3.0, dims=[1]), torch.full((2,), 3.0))
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor' for argument 'x'"):
        op(1.0)

    @torch.library.register_fake("schemalib::scale")
    def _(x, s=2.0, dims=(0, 1)):
        return torch.empty_like(x)

    assert op(torch.empty(4, 3, device="meta")).shape == (4, 3)
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula was registered"):
        op(x).sum().backward()
    torch.library.register_autograd("schemalib::scale", lambda ctx, g: (g * ctx.s, None),
                                    setup_context=lambda ctx, inputs, output: setattr(ctx, "s", inputs[1]))
    op(x, 5.0).sum().backward()
    assert torch.equal(x.grad, torch.full((2,), 5.0))
    compiled = torch.compile(lambda a: op(a, 4.0) + 1)
    assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 5.0))
    assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 5.0)) and compiled.replays == 1

    with pytest.raises(RuntimeError, match="Only a single TORCH_LIBRARY"):
        torch.library.Library("schemalib", "DEF")
    fragment = torch.library.Library("schemalib", "FRAGMENT")
    fragment.define("twice(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match="already registered"):
        fragment.define("twice(Tensor x) -> Tensor")
    del lib, fragment
    gc.collect()
    assert not hasattr(torch.ops.schemalib, "scale") and not hasattr(torch.ops.schemalib, "twice")
    torch.library.Library("schemalib", "DEF")._destroy()  # the namespace is free again


def test_define_and_impl_by_name_with_composite_and_autograd_kernels():
    torch.library.define("schemalib2::twice", "(Tensor x) -> Tensor")

    @torch.library.impl("schemalib2::twice", "CompositeImplicitAutograd")
    def twice(x):
        return x * 2

    y = torch.ones(3, requires_grad=True)
    torch.ops.schemalib2.twice(y).sum().backward()
    assert torch.equal(y.grad, torch.full((3,), 2.0)), "autograd went through the composite's ops"

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    torch.library.define("schemalib2::cube", "(Tensor x) -> Tensor")
    torch.library.impl("schemalib2::cube", ["cpu", "cuda"], lambda x: x ** 3)
    torch.library.impl("schemalib2::cube", "Autograd", Cube.apply)
    z = torch.full((2,), 2.0, requires_grad=True)
    out = torch.ops.schemalib2.cube(z)
    out.sum().backward()
    assert torch.equal(out.detach(), torch.full((2,), 8.0)) and torch.equal(z.grad, torch.full((2,), 12.0))
    assert torch.equal(torch.ops.schemalib2.cube(torch.full((2,), 3.0)), torch.full((2,), 27.0))
    with pytest.raises(ValueError, match="dispatch key 'XLA' is not supported"):
        torch.library.impl("schemalib2::cube", "XLA", lambda x: x)
    with pytest.raises(ValueError, match="cannot read the default"):
        torch.library.define("schemalib2::bad", "(Tensor x, int n=oops) -> Tensor")
    with pytest.raises(ValueError, match="needs a type and a name"):
        torch.library.define("schemalib2::bad2", "(Tensor) -> Tensor")
    with pytest.raises(ValueError, match="unsupported kind"):
        torch.library.Library("schemalib2", "BOGUS")


def test_a_fake_with_a_data_dependent_size_asks_get_ctx_and_opcheck_takes_it():
    @torch.library.custom_op("t_ctx::nonzero", mutates_args=())
    def nonzero(x: Tensor) -> Tensor:
        return torch.tensor(np.stack(np.nonzero(x.numpy(force=True)), axis=1))

    @nonzero.register_fake
    def _(x):
        nnz = torch.library.get_ctx().new_dynamic_size()
        return x.new_empty([nnz, x.dim()], dtype=torch.int64)

    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert torch.equal(nonzero(x), torch.tensor([[0, 0], [1, 1]]))
    assert torch.library.opcheck(nonzero, (x,))["test_faketensor"] == "SUCCESS"
    with pytest.raises(RuntimeError, match="data-dependent output size with meta tensors"):
        nonzero(torch.empty(2, 2, device="meta"))
    with pytest.raises(RuntimeError, match="get_ctx\\(\\) was called outside a fake"):
        torch.library.get_ctx()
    # opcheck still compares rank and dtype of such an output.
    nonzero.register_fake(lambda x: x.new_empty([torch.library.get_ctx().new_dynamic_size()], dtype=torch.int64))
    with pytest.raises(RuntimeError, match="output 0: the kernel gives trainrun.int64 \\[2, 2\\], the fake"):
        torch.library.opcheck(nonzero, (x,))


def test_an_op_that_only_writes_its_arguments_needs_no_fake_and_kernels_can_be_switched_off():
    @torch.library.custom_op("t_ctx::sin_into", mutates_args={"out"})
    def sin_into(x: Tensor, out: Tensor) -> None:
        np.sin(x.numpy(), out=out.numpy())

    x, out = torch.randn(3), torch.empty(3)
    assert torch.library.opcheck(sin_into, (x, out))["test_faketensor"] == "SUCCESS"
    assert sin_into(torch.empty(3, device="meta"), torch.empty(3, device="meta")) is None

    @torch.library.custom_op("t_ctx::scaled", mutates_args=())
    def scaled(x: Tensor) -> Tensor:
        return x.clone()

    scaled.register_kernel("cpu")(lambda x: x * 10)
    assert scaled(torch.ones(1)).item() == 10
    with scaled.set_kernel_enabled("cpu", enabled=False):
        assert scaled(torch.ones(1)).item() == 1  # (the decorated function)
    assert scaled(torch.ones(1)).item() == 10


def test_numpy_force_detaches_and_copies():
    t = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="requires grad; call detach"):
        t.numpy()
    a = t.numpy(force=True)
    assert a.tolist() == [1.0, 1.0]
