"""__torch_function__ (trainrun.overrides), as PyTorch's "Extending torch with a Tensor-like type" and tensor
subclass documentation use it: a class that is not a tensor, a Tensor subclass (logging, type-preserving), one that
keeps Tensor's default, nn.Parameter's opt-out, TorchFunctionMode, the Disable* blocks, and the helpers a
library's own functions call. Where PyTorch 1.13 is installed, a subclass logs the same calls under both."""
import functools
import inspect
import pathlib
import pickle
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
if not (ROOT / "bazel-bin" / "python" / "trainrun" / "_C.so").exists():
    pytest.skip("trainrun._C is not built (bazel build //python:trainrun/_C.so)", allow_module_level=True)

import trainrun as torch  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun.overrides import (TorchFunctionMode, handle_torch_function, has_torch_function,  # noqa: E402
                                get_overridable_functions, wrap_torch_function)


def scalar_tensor_class(torch_module):
    """The docs' ScalarTensor (N x N times a value, not a tensor) implementing mean and add."""
    handled = {}

    class ScalarTensor:
        def __init__(self, N, value):
            self._N, self._value = N, value

        def tensor(self):
            return self._value * torch_module.eye(self._N)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func not in handled or not all(issubclass(t, (torch_module.Tensor, ScalarTensor)) for t in types):
                return NotImplemented
            return handled[func](*args, **(kwargs or {}))

    def implements(torch_function):
        def decorator(func):
            functools.update_wrapper(func, torch_function)
            handled[torch_function] = func
            return func
        return decorator

    @implements(torch_module.mean)
    def mean(input):  # noqa: A002
        return float(input._value) / input._N

    @implements(torch_module.add)
    def add(input, other):  # noqa: A002
        if isinstance(input, ScalarTensor) and isinstance(other, ScalarTensor):
            return ScalarTensor(input._N, input._value + other._value)
        as_tensor = [a.tensor() if isinstance(a, ScalarTensor) else a for a in (input, other)]
        return torch_module.add(*as_tensor)

    return ScalarTensor


def test_a_class_that_is_not_a_tensor_takes_the_functions_it_implements():
    ScalarTensor = scalar_tensor_class(torch)
    d = ScalarTensor(5, 2)
    assert torch.mean(d) == 0.4
    s = torch.add(ScalarTensor(2, 2), ScalarTensor(2, 3))
    assert isinstance(s, ScalarTensor) and s._value == 5
    mixed = torch.add(ScalarTensor(2, 2), torch.ones(2, 2))
    assert mixed.tolist() == [[3.0, 1.0], [1.0, 3.0]]
    assert torch.add(input=ScalarTensor(2, 1), other=ScalarTensor(2, 1))._value == 2  # keyword arguments too
    with pytest.raises(TypeError, match=r"no implementation found for 'trainrun\.sum' on types that implement "
                                        r"__torch_function__: \[<class '.*ScalarTensor'>\]"):
        torch.sum(d)


def logging_subclass(torch_module):
    """A Tensor subclass that logs each call's function name, then runs it as Tensor's default does (results come
    back as the subclass): one for trainrun, one for PyTorch when it is the oracle."""
    class LoggingTensor(torch_module.Tensor):
        log = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.log.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    return LoggingTensor


LoggingTensor = logging_subclass(torch)


def logged_calls(torch_module, subclass):
    subclass.log.clear()
    x = torch_module.arange(6.0).reshape(2, 3).as_subclass(subclass)
    results = [x + 1, torch_module.mul(x, 2), x.sum(dim=0), torch_module.cat([x, x]),
               torch_module.nn.functional.relu(x), x.max(dim=1), x.t(), torch_module.matmul(x, x.t())]
    return list(subclass.log), results


def test_a_subclass_sees_functions_methods_and_operators_and_keeps_its_class():
    log, (plus, times, col_sum, both, relu, row_max, t, mm) = logged_calls(torch, LoggingTensor)
    assert log == ["add", "mul", "sum", "cat", "relu", "max", "t", "t", "matmul"]
    for r in (plus, times, col_sum, both, relu, t, mm, row_max.values, row_max.indices):
        assert type(r) is LoggingTensor
    assert row_max.indices.tolist() == [2, 2]  # (still the named tuple)
    assert mm.tolist() == [[5.0, 14.0], [14.0, 50.0]]
    LoggingTensor.log.clear()
    assert repr(plus).startswith("LoggingTensor([[1., 2., 3.],") and LoggingTensor.log == ["__repr__"]


def test_the_same_calls_reach_pytorchs_torch_function():
    real = pytest.importorskip("torch", reason="PyTorch is not installed: no oracle for the logged calls")

    RealLogging = logging_subclass(real)
    theirs, their_results = logged_calls(real, RealLogging)
    ours, our_results = logged_calls(torch, LoggingTensor)
    assert ours == theirs
    assert [type(r) is LoggingTensor for r in our_results] == [type(r) is RealLogging for r in their_results]


def test_a_subclass_without_its_own_keeps_its_class_through_ops_and_autograd():
    class Tagged(torch.Tensor):
        pass

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True).as_subclass(Tagged)
    y = (x * x).sum()
    assert type(y) is Tagged and type(x.detach()) is Tagged
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    with torch._C.DisableTorchFunctionSubclass():
        assert type(x + 1) is torch.Tensor  # (the default's own way of running the call)


def test_parameters_opt_out_and_plain_tensors_are_untouched():
    p = torch.nn.Parameter(torch.ones(2, 2))
    assert type(p * 2) is torch.Tensor and type(F.linear(torch.ones(1, 2), p)) is torch.Tensor
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not has_torch_function((p, torch.ones(1), 3))
    assert type(torch.add(torch.ones(1), 1)) is torch.Tensor


class Recording(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(func.__name__)
        return func(*args, **(kwargs or {}))  # (the mode is off its stack meanwhile: no recursion)


def test_a_mode_sees_every_call_on_its_thread_while_entered():
    a = torch.ones(3)
    with Recording() as mode:
        b = torch.add(a, 1)
        c = F.relu(b)
        z = torch.zeros(2)
        with Recording() as inner:
            torch.mul(c, 2)
    torch.sub(a, 1)
    assert mode.calls == ["add", "relu", "zeros", "mul"] and inner.calls == ["mul"]
    assert z.tolist() == [0.0, 0.0] and c.tolist() == [2.0, 2.0, 2.0]
    with torch._C.DisableTorchFunction(), Recording() as off:
        torch.add(a, 1)
    assert off.calls == []


def test_a_mode_that_returns_not_implemented_falls_through_to_an_error():
    class Refusing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return NotImplemented

    one = torch.ones(1)
    with Refusing(), pytest.raises(TypeError, match=r"no implementation found for 'trainrun\.neg'.* nor in mode"):
        torch.neg(one)


def test_a_librarys_own_function_dispatches_with_the_helpers():
    ScalarTensor = scalar_tensor_class(torch)
    seen = []

    def halve(x):
        if has_torch_function((x,)):
            return handle_torch_function(halve, (x,), x)
        return x / 2

    @wrap_torch_function(lambda x: (x,))
    def double(x):
        return x * 2

    class Catching(ScalarTensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return "caught"

    assert halve(torch.tensor([4.0])).tolist() == [2.0] and double(torch.tensor([1.0])).tolist() == [2.0]
    assert halve(Catching(1, 1)) == "caught" and double(Catching(1, 1)) == "caught"
    assert seen == [halve, double]


def innermost_wrapper(f):
    """The __torch_function__ wrapper under f (DTensor, once imported, wraps some functions again)."""
    while not torch._C._is_torch_function_wrapper(f):
        f = f.__wrapped__
    return f


def test_wrapped_functions_still_look_and_pickle_like_themselves():
    add = innermost_wrapper(torch.add)
    assert add.__name__ == "add" and repr(add) == repr(add.__wrapped__)
    assert add == add.__wrapped__ and hash(add) == hash(add.__wrapped__)
    assert pickle.loads(pickle.dumps(add)) is torch.add
    assert pickle.loads(pickle.dumps(innermost_wrapper(F.linear))) is F.linear
    assert list(inspect.signature(F.softmax).parameters)[:2] == ["input", "dim"]
    assert torch.add in get_overridable_functions()[torch]
    assert torch.Tensor.add in get_overridable_functions()[torch.Tensor]

    class Holder:
        soft = F.softmax  # a Python function's wrapper binds as a method, as the function would

    assert Holder().soft.__self__.__class__ is Holder


def test_subclasses_are_built_as_pytorchs_docs_build_them():
    class WithMetadata(torch.Tensor):
        @staticmethod
        def __new__(cls, x, extra, *args, **kwargs):
            return super().__new__(cls, x, *args, **kwargs)

        def __init__(self, x, extra):
            self.extra = extra

    data = torch.tensor([1.0, 2.0])
    t = WithMetadata(data, "meta")
    assert type(t) is WithMetadata and t.extra == "meta" and t.tolist() == [1.0, 2.0]
    t.add_(1)
    assert data.tolist() == [2.0, 3.0]  # (the instance is `data` itself)
    assert type(t * 2) is WithMetadata and not hasattr(t * 2, "extra")

    class Made(torch.Tensor):
        @staticmethod
        def __new__(cls, data):
            return torch.Tensor._make_subclass(cls, data, True)

    m = Made(torch.ones(2))
    assert type(m) is Made and m.requires_grad and m.is_leaf
    with pytest.raises(TypeError, match="as_subclass: expected a subclass of trainrun.Tensor"):
        torch.ones(1).as_subclass(int)


def mode_log(torch_module, mode_class):
    class Log(mode_class):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.calls.append(func.__name__)
            return func(*args, **(kwargs or {}))

    with Log() as log:
        a = torch_module.ones(2, 3)
        b = a + 1
        c = b.relu()
        d = torch_module.nn.functional.softmax(c, dim=1)
        e = torch_module.mul(d.sum(), 2).exp()
    return log.calls, float(e)


def test_a_mode_sees_plain_tensors_methods_and_operators_as_pytorchs_does():
    add_before = torch.Tensor.__dict__["add"]
    ours, value = mode_log(torch, TorchFunctionMode)
    assert ours == ["ones", "add", "relu", "softmax", "sum", "mul", "exp"]
    assert abs(value - 54.59815) < 1e-3  # exp(2 * sum of two softmax rows)
    assert torch.Tensor.__dict__["add"] is add_before  # (Tensor's own methods are back once no mode is on)
    real = pytest.importorskip("torch", reason="PyTorch is not installed: no oracle for the mode's log")
    from torch.overrides import TorchFunctionMode as RealMode
    assert mode_log(real, RealMode)[0] == ours
