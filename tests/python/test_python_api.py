"""The trainrun Python package against NumPy: factories and dtypes, ops and
broadcasting, operators with Python numbers, indexing, zero-copy NumPy
interop, autograd against finite differences, grad modes, and errors
arriving as the matching Python exceptions. Imports the package from the
source tree (python/), with the extension Bazel built."""
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
if not (ROOT / "bazel-bin" / "python" / "trainrun" / "_C.so").exists():
    pytest.skip("trainrun._C is not built (bazel build //python:trainrun/_C.so)", allow_module_level=True)

import trainrun as tr  # noqa: E402


def test_factories_and_dtypes():
    assert tr.zeros([2, 3]).shape == (2, 3)
    assert tr.zeros([2, 3]).dtype == tr.float32
    assert tr.ones([2], dtype=tr.int64).tolist() == [1, 1]
    assert tr.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert tr.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert tr.full([2], 7).tolist() == [7, 7]
    assert tr.tensor([1, 2]).dtype == tr.int64  # as PyTorch
    assert tr.tensor([1.5]).dtype == tr.float32
    assert tr.tensor([True, False]).dtype == tr.bool
    assert tr.tensor(np.array([1.0])).dtype == tr.float64  # an ndarray keeps its dtype
    assert repr(tr.float32) == "trainrun.float32" and str(tr.bfloat16) == "trainrun.bfloat16"
    assert tr.tensor([1.0, 2.0]).to(tr.bfloat16).tolist() == [1.0, 2.0]
    tr.manual_seed(3)
    a = tr.randn([4])
    tr.manual_seed(3)
    assert tr.randn([4]).tolist() == a.tolist()
    # empty_strided: the layout asked for (a transposed one here), its storage spanning the furthest element.
    t = tr.empty_strided((2, 3), (1, 2), dtype=tr.float64)
    assert t.shape == (2, 3) and t.stride() == (1, 2) and t.dtype == tr.float64 and not t.is_contiguous()
    t.copy_(tr.arange(6.0).reshape(2, 3))
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert tr.empty_strided((0, 4), (4, 1)).shape == (0, 4)
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        tr.empty_strided((2, 3), (1,))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid", "abs", "relu", "sin", "floor"])
def test_unary_ops_match_numpy(name):
    x = np.random.default_rng(0).uniform(0.1, 3.0, size=(3, 5)).astype(np.float32)
    special = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0)}
    reference = special[name] if name in special else getattr(np, name)
    np.testing.assert_allclose(getattr(tr, name)(tr.tensor(x)).numpy(), reference(x), rtol=1e-6, atol=1e-6)


def test_binary_ops_broadcasting_and_numbers():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)
    ta, tb = tr.tensor(a), tr.tensor(b)
    np.testing.assert_allclose((ta + tb).numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose((ta - 2).numpy(), a - 2, rtol=1e-6)
    np.testing.assert_allclose((2 - ta).numpy(), 2 - a, rtol=1e-6)
    np.testing.assert_allclose((ta * 3.5).numpy(), a * 3.5, rtol=1e-6)
    np.testing.assert_allclose((1 / (ta + 10)).numpy(), 1 / (a + 10), rtol=1e-6)
    np.testing.assert_allclose((ta ** 2).numpy(), a ** 2, rtol=1e-6)
    np.testing.assert_allclose((ta @ ta.T).numpy(), a @ a.T, rtol=1e-5)
    np.testing.assert_array_equal((ta > tb).numpy(), a > b)
    np.testing.assert_allclose(ta.sum(1).numpy(), a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(ta.mean().item(), a.mean(), rtol=1e-5)
    np.testing.assert_allclose(ta.softmax(1).numpy(), np.exp(a) / np.exp(a).sum(1, keepdims=True), rtol=1e-5)
    assert ta.argmax(1).tolist() == a.argmax(1).tolist()
    i = tr.tensor([5, 7])
    assert (i % 3).tolist() == [2, 1]
    c = tr.tensor([1.0, 2.0])
    c += 1
    c *= tr.tensor([2.0, 3.0])
    assert c.tolist() == [4.0, 9.0]


def test_indexing_matches_numpy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = tr.tensor(x)
    for index in [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 2), (0, slice(1, None)), (None, 1),
                  (slice(None, None, 2),), (1, Ellipsis, slice(0, 3, 2)), (0, None, slice(None), 3)]:
        np.testing.assert_array_equal(t[index].numpy(), x[index], err_msg=str(index))
    mask = x > 10
    np.testing.assert_array_equal(t[tr.tensor(mask)].numpy(), x[mask])
    np.testing.assert_array_equal(t[tr.tensor([1, 0, 1])].numpy(), x[[1, 0, 1]])
    t[0, 1] = 100.0
    t[1, :, 0] = tr.tensor([7.0, 8.0, 9.0])
    t[t > 20] = -1
    x[0, 1] = 100.0
    x[1, :, 0] = [7.0, 8.0, 9.0]
    x[x > 20] = -1
    np.testing.assert_array_equal(t.numpy(), x)
    with pytest.raises(IndexError, match="out of bounds"):
        t[2]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]


def test_numpy_interop_shares_memory_both_ways():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = tr.from_numpy(x)
    t.fill_(1.5)
    assert x[1, 2] == 1.5  # the tensor writes into the array's memory
    y = t.numpy()
    y[0, 0] = -3
    assert t[0, 0].item() == -3
    del x
    assert t.sum().item() == 1.5 * 5 - 3  # the tensor keeps the array alive
    transposed = tr.tensor(np.arange(6.0).reshape(2, 3)).t()
    np.testing.assert_array_equal(transposed.numpy(), np.arange(6.0).reshape(2, 3).T)  # strides carried over
    with pytest.raises(TypeError, match="no NumPy dtype"):
        tr.ones([2]).to(tr.bfloat16).numpy()
    with pytest.raises(ValueError, match="detach"):
        tr.ones([2]).requires_grad_().numpy()


def test_autograd_matches_finite_differences():
    rng = np.random.default_rng(2)
    x0, w0 = rng.normal(size=(4, 3)), rng.normal(size=(3, 2))

    def f(x, w):
        return (((x @ w).tanh() * 2 + x.sum(1, keepdim=True)) ** 2).mean()

    x, w = tr.tensor(x0, requires_grad=True), tr.tensor(w0, requires_grad=True)
    loss = f(x, w)
    loss.backward()
    eps = 1e-6
    for leaf, base, which in [(x, x0, 0), (w, w0, 1)]:
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            args_p = [tr.tensor(plus if which == 0 else x0), tr.tensor(plus if which == 1 else w0)]
            args_m = [tr.tensor(minus if which == 0 else x0), tr.tensor(minus if which == 1 else w0)]
            numeric[idx] = (f(*args_p).item() - f(*args_m).item()) / (2 * eps)
        np.testing.assert_allclose(leaf.grad.numpy(), numeric, rtol=1e-5, atol=1e-7)
    assert x.is_leaf and not loss.is_leaf and loss.grad_fn_name is not None
    gx, = tr.autograd.grad(f(x, w), x)
    np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-12)


def test_grad_modes_and_hooks():
    x = tr.tensor([1.0, 2.0], requires_grad=True)
    with tr.no_grad():
        y = x * 2
    assert not y.requires_grad
    with tr.no_grad():
        with tr.enable_grad():
            assert (x * 2).requires_grad

    @tr.no_grad()
    def frozen(v):
        return v * 3

    assert not frozen(x).requires_grad
    assert tr.is_grad_enabled()
    seen = []
    z = x * 3
    z.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    z.sum().backward()
    assert seen == [[1.0, 1.0]] and x.grad.tolist() == [30.0, 30.0]


def test_errors_are_python_exceptions():
    with pytest.raises(ValueError, match="cannot be broadcast"):
        tr.ones([2, 3]) + tr.ones([4])
    with pytest.raises(TypeError):
        tr.ones([2]) + "a"
    with pytest.raises(ValueError, match="one-element"):
        float(tr.ones([2]))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w = tr.ones([2]).requires_grad_()
        w += 1


def test_argument_errors_are_also_runtime_errors_as_pytorchs_are():
    # PyTorch raises RuntimeError for these; trainrun's ValueError/TypeError subclass it too.
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        tr.ones([2, 3]) + tr.ones([4])
    with pytest.raises(RuntimeError):
        tr.arange(6.0).view(2, 3).t().view(6)
    with pytest.raises(RuntimeError):
        tr.ones([2, 2]) @ tr.ones([2, 2], dtype=tr.float64)
    try:
        tr.ones([3]).view(2, 2)
    except RuntimeError as e:
        assert isinstance(e, ValueError) and type(e).__module__ == "trainrun._C"


def test_product_shapes_are_checked_on_every_entry_point():
    # The generated bindings (tr.mm, Tensor.addmm, ...) and the meta device reach the kernels without the C++
    # fronts: each kernel checks, so BLAS never sees mismatched sizes.
    a, b = tr.randn(3, 4), tr.randn(3, 4)
    for call in (lambda: tr.mm(a, b), lambda: a.mm(b), lambda: tr.addmm(tr.randn(4), a, b), lambda: a.addmm(a, b),
                 lambda: tr.mm(a.to("meta"), b.to("meta"))):
        with pytest.raises(ValueError, match=r"shapes \[3, 4\] and \[3, 4\] cannot be multiplied"):
            call()
    with pytest.raises(ValueError, match="batch sizes differ"):
        tr.baddbmm(tr.randn(2, 3, 3), tr.randn(2, 3, 4), tr.randn(3, 4, 3))
    with pytest.raises(ValueError, match="expected 2-D"):
        tr.mm(a, tr.randn(4))


def test_windows_larger_than_the_input_give_no_output_and_an_error():
    # (2 - 3) // 3 + 1 is 0 windows; C++'s truncating division made it 1.
    with pytest.raises(ValueError, match="too small for the kernel"):
        tr.nn.functional.max_pool2d(tr.randn(1, 1, 2, 2), 3)
    with pytest.raises(ValueError, match="larger than the padded input"):
        tr.nn.functional.conv2d(tr.randn(1, 1, 2, 2), tr.randn(1, 1, 3, 3), stride=2)


def test_dlpack_both_ways():
    t = tr.arange(6, dtype=tr.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(6, dtype=np.float32).reshape(2, 3))
    c = tr.from_dlpack(np.arange(4.0))
    assert c.dtype == tr.float64 and c.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert "dtype=trainrun.float64" in repr(c)
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    shared = torch.from_dlpack(t)  # no copy: writes show on both sides
    shared[1, 1] = -1.0
    assert t[1, 1].item() == -1.0
    back = tr.from_dlpack(torch.arange(3, dtype=torch.int64))
    back[0] = 7
    assert back.tolist() == [7, 1, 2]


def test_custom_function_in_python():
    class ScaledCube(tr.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * x * x * scale

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x * x * g * ctx.scale, None

    x = tr.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = ScaledCube.apply(x, 2.0)
    assert y.grad_fn_name == "ScaledCubeBackward"
    (y * tr.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 48.0, 4.5], rtol=1e-6)
    with tr.no_grad():
        assert not ScaledCube.apply(x, 2.0).requires_grad

    class Wrong(tr.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g  # one gradient for two inputs

    a, b = tr.ones([2]).requires_grad_(), tr.ones([2]).requires_grad_()
    with pytest.raises(ValueError, match="Wrong.backward returned 1 gradients, but forward took 2 arguments"):
        Wrong.apply(a, b).sum().backward()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"])
def test_numpy_round_trips_every_dtype_with_extreme_values(dtype):
    """NumPy -> trainrun -> NumPy keeps the dtype and every bit, for the
    dtype's negative, extreme and special values, both when sharing memory
    (from_numpy) and when copying (tensor)."""
    np_dtype = np.dtype(dtype)
    if np_dtype.kind == "f":
        info = np.finfo(np_dtype)
        values = [info.min, -1.5, -info.tiny, -0.0, 0.0, info.tiny, 2.5, info.max, np.inf, -np.inf, np.nan]
    elif np_dtype.kind in "iu":
        info = np.iinfo(np_dtype)
        values = sorted({int(info.min), int(info.min) + 1, -1 if info.min < 0 else 0, 0, 1, 2,
                         int(info.max) - 1, int(info.max)})
    else:
        values = [True, False, True]
    a = np.array(values, dtype=np_dtype)
    shared = tr.from_numpy(a)
    copied = tr.tensor(a)
    assert str(shared.dtype) == f"trainrun.{dtype}" and str(copied.dtype) == f"trainrun.{dtype}"
    for t in (shared, copied):
        back = t.numpy()
        assert back.dtype == np_dtype
        assert back.tobytes() == a.tobytes(), (dtype, back, a)
    # from_numpy shares memory both ways; tensor() copies.
    a[1] = a[0]
    assert shared.numpy()[1] == a[0] or (np_dtype.kind == "f" and np.isnan(a[0]))
    assert copied.numpy().tobytes() != a.tobytes()
    # Values built on the trainrun side come out as NumPy has them.
    if np_dtype.kind in "iu":
        assert tr.tensor(values, dtype=getattr(tr, dtype)).numpy().tolist() == values


def test_factories_take_sizes_as_varargs_or_one_sequence_as_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    for name in ("zeros", "ones", "empty", "rand", "randn"):
        for args in ((2, 3), ((2, 3),), ([4],), (5,), ((),)):
            ours, theirs = getattr(tr, name)(*args), getattr(torch, name)(*args)
            assert tuple(ours.shape) == tuple(theirs.shape), (name, args)
            assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1], (name, args)
    for fill in (1.5, 3, True):
        ours, theirs = tr.full((2, 2), fill), torch.full((2, 2), fill)
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1] and ours.tolist() == theirs.tolist()
    assert tr.zeros(2, 3, dtype=tr.int32).dtype == tr.int32
    x = tr.ones(3, requires_grad=True)
    assert x.requires_grad and tr.zeros_like(x).shape == (3,) and not tr.zeros_like(x).requires_grad
    assert tr.full_like(x, 7).tolist() == [7.0, 7.0, 7.0] and tr.ones_like(x, dtype=tr.float64).dtype == tr.float64
    assert tr.randint(5, (3, 2)).shape == (3, 2) and tr.randint(-2, 2, (100,)).min().item() >= -2
    assert tr.randint(0, 10, size=(4,)).dtype == tr.int64
    with pytest.raises(TypeError, match="size must be ints"):
        tr.zeros(2, "3")
    with pytest.raises(TypeError, match="missing its size"):
        tr.zeros()
    with pytest.raises(ValueError, match="negative dimension -1"):
        tr.ones(2, -1)
    # A Generator drives its own stream: the same seed gives the same draws, independent of manual_seed.
    first = tr.rand(3, generator=tr.Generator().manual_seed(5))
    tr.manual_seed(123)
    assert first.tolist() == tr.rand(3, generator=tr.Generator().manual_seed(5)).tolist()


def test_reductions_take_dim_keywords_and_return_named_tuples_as_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    data = [[3.0, -1.0, 2.5, 7.0], [0.5, 4.0, -2.0, 1.0], [9.0, 8.0, 6.0, -3.0]]  # no ties
    x, tx = tr.tensor(data), torch.tensor(data)
    assert x.max().item() == tx.max().item() and tr.min(x).item() == torch.min(tx).item()
    for name in ("max", "min"):
        for dim in (0, 1, -1):
            for keepdim in (False, True):
                ours, theirs = getattr(x, name)(dim=dim, keepdim=keepdim), getattr(tx, name)(dim=dim, keepdim=keepdim)
                assert type(ours).__name__ == type(theirs).__name__ == name
                assert ours.values.tolist() == theirs.values.tolist() and ours.indices.tolist() == theirs.indices.tolist()
                values, indices = getattr(tr, name)(x, dim, keepdim)
                assert values.tolist() == theirs.values.tolist() and indices.tolist() == theirs.indices.tolist()
        other, tother = tr.full((3, 4), 1.0), torch.full((3, 4), 1.0)
        assert getattr(tr, name)(x, other).tolist() == getattr(torch, name)(tx, tother).tolist()
    for descending in (False, True):
        ours, theirs = x.sort(dim=0, descending=descending), tx.sort(dim=0, descending=descending)
        assert ours.values.tolist() == theirs.values.tolist() and ours.indices.tolist() == theirs.indices.tolist()
    ours, theirs = tr.topk(x, 2, dim=1), torch.topk(tx, 2, dim=1)
    assert ours.values.tolist() == theirs.values.tolist() and ours.indices.tolist() == theirs.indices.tolist()
    assert x.topk(1, largest=False).indices.tolist() == tx.topk(1, largest=False).indices.tolist()
    np.testing.assert_allclose(tr.softmax(x, dim=-1).numpy(), torch.softmax(tx, dim=-1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.log_softmax(dim=0).numpy(), tx.log_softmax(dim=0).numpy(), rtol=1e-6, atol=2e-6)
    assert tr.softmax(x, 1, dtype=tr.float64).dtype == tr.float64
    assert x.cumsum(dim=1).tolist() == tx.cumsum(dim=1).tolist()
    idx, tidx = tr.tensor([2, 0]), torch.tensor([2, 0])
    assert tr.index_select(x, dim=0, index=idx).tolist() == torch.index_select(tx, dim=0, index=tidx).tolist()
    g, tg = tr.tensor([[1, 0], [3, 3], [0, 2]]), torch.tensor([[1, 0], [3, 3], [0, 2]])
    assert x.gather(dim=1, index=g).tolist() == tx.gather(dim=1, index=tg).tolist()
    with pytest.raises(TypeError, match="dim must be an int"):
        x.max(dim="1")


def test_size_expand_all_any_and_new_tensors_as_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    x, tx = tr.ones(2, 3), torch.ones(2, 3)
    assert isinstance(x.shape, tr.Size) and x.shape == tx.shape and x.size() == tx.size() and x.size(-1) == 3
    assert x.shape.numel() == tx.shape.numel() and x.shape[1:] == tx.shape[1:] and isinstance(x.shape[1:], tr.Size)
    assert x.expand(4, 2, 3).shape == tx.expand(4, 2, 3).shape == x.expand((4, 2, 3)).shape
    assert tr.ones(1, 3).expand_as(x).shape == x.shape
    data = [[True, False, True], [True, True, True]]
    b, tb = tr.tensor(data), torch.tensor(data)
    for dim in (None, 0, 1, (0, 1)):
        for keepdim in (False, True):
            if dim is None and keepdim:
                continue
            for name in ("all", "any"):
                ours = getattr(b, name)() if dim is None else getattr(b, name)(dim=dim, keepdim=keepdim)
                theirs = getattr(tb, name)() if dim is None else (
                    getattr(tb, name)(dim=dim, keepdim=keepdim) if not isinstance(dim, tuple)
                    else getattr(tb, name)().reshape([1, 1] if keepdim else []))
                assert ours.tolist() == theirs.tolist() and tuple(ours.shape) == tuple(theirs.shape), (name, dim)
    assert tr.all(b).item() is False and tr.any(b, dim=0).tolist() == [True, True, True]
    for name in ("new_zeros", "new_ones", "new_empty"):
        ours, theirs = getattr(x, name)(2, 2), getattr(tx, name)(2, 2)
        assert ours.shape == theirs.shape and ours.dtype == tr.float32
    assert x.new_full((3,), 7).tolist() == tx.new_full((3,), 7).tolist()
    assert x.new_zeros((2,), dtype=tr.int64).dtype == tr.int64
    assert tr.arange(3).type_as(x).dtype == tr.float32


def test_load_reads_torch_save_checkpoints_and_refuses_code(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))
    base = torch.arange(24, dtype=torch.float32).view(4, 6)
    state = dict(model.state_dict())
    state.update({"view": base[1:, ::2].t(), "same_storage": base, "bf16": torch.tensor([1.5, -2.25, 3e38]).bfloat16(),
                  "i8": torch.tensor([-128, 0, 127], dtype=torch.int8), "flag": torch.tensor([True, False]),
                  "param": torch.nn.Parameter(torch.ones(2)), "nested": {"list": [torch.zeros(1), 3, "x"]}})
    path = tmp_path / "model.pt"
    torch.save(state, path)
    loaded = tr.load(path)
    for key, value in state.items():
        if key == "nested":
            continue
        ours = loaded[key]
        assert tuple(ours.shape) == tuple(value.shape), key
        assert str(ours.dtype).split(".")[1] == str(value.dtype).split(".")[1], key
        assert ours.float().tolist() == value.float().tolist(), key
    assert loaded["nested"]["list"][1:] == [3, "x"] and loaded["nested"]["list"][0].tolist() == [0.0]
    # The weights drive a trainrun model to PyTorch's output.
    ours_model = tr.nn.Sequential(tr.nn.Linear(4, 3), tr.nn.LayerNorm(3), tr.nn.Linear(3, 2))
    ours_model.load_state_dict({k: loaded[k] for k in model.state_dict()})
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(ours_model(tr.from_numpy(x)).detach().numpy(),
                               model(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    # A checkpoint that would run code is refused, naming the global; nothing runs.

    class Evil:
        def __reduce__(self):
            import os
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    torch.save({"w": torch.ones(1), "payload": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(Exception, match="os.system|posix.system"):
        tr.load(tmp_path / "evil.pt")
    assert not (tmp_path / "ran").exists()
    # safetensors files still load as before.
    tr.save({"a": tr.ones(2)}, str(tmp_path / "a.safetensors"))
    assert tr.load(tmp_path / "a.safetensors")["a"].tolist() == [1.0, 1.0]


def test_optimizer_param_groups_as_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    results = []
    for lib in (tr, torch):
        a = lib.tensor([1.0, -2.0], requires_grad=True)
        b = lib.tensor([0.5, 3.0], requires_grad=True)
        opt = lib.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5, "momentum": 0.9}], lr=0.1)
        assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
        assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[0]["momentum"] == 0.0
        for step in range(3):
            opt.zero_grad()
            ((a * a).sum() + (b * b * b).sum()).backward()
            opt.step()
            opt.param_groups[0]["lr"] = 0.1 / (step + 2)  # what a hand-written schedule does
        c = lib.tensor([1.0], requires_grad=True)
        opt.add_param_group({"params": [c], "lr": 0.2})
        assert len(opt.param_groups) == 3 and opt.param_groups[2]["lr"] == 0.2
        adam = lib.optim.AdamW([a], betas=(0.8, 0.95))
        assert tuple(adam.param_groups[0]["betas"]) == (0.8, 0.95)
        results.append((a.detach().tolist(), b.detach().tolist()))
    np.testing.assert_allclose(np.array(results[0], dtype=np.float64), np.array(results[1], dtype=np.float64),
                               rtol=1e-5)
    opt = tr.optim.SGD([tr.ones(1, requires_grad=True)], lr=0.1)
    with pytest.raises(KeyError, match="no option 'betas'"):
        opt.param_groups[0]["betas"] = (0.9, 0.99)
    # A group's own keys (a script's 'name', the 'initial_lr' schedulers add) stay in the group, as in PyTorch,
    # and travel in state_dict.
    opt.add_param_group({"params": [tr.ones(1, requires_grad=True)], "colour": "red", "lr": 0.3})
    assert opt.param_groups[1]["colour"] == "red" and opt.param_groups[1]["lr"] == 0.3
    opt.param_groups[0]["initial_lr"] = 0.1
    assert opt.state_dict()["param_groups"][0]["initial_lr"] == 0.1
    named = tr.optim.AdamW([{"params": [tr.ones(1, requires_grad=True)], "name": "decay", "lr": 0.5}], lr=0.1)
    assert named.param_groups[0]["name"] == "decay" and named.param_groups[0]["lr"] == 0.5
    restored = tr.optim.AdamW([tr.ones(1, requires_grad=True)])
    restored.load_state_dict(named.state_dict())
    assert restored.param_groups[0]["name"] == "decay" and restored.param_groups[0]["lr"] == 0.5


def test_nn_utils_clip_and_vectors_and_loss_modules_as_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    out = {}
    for lib in (tr, torch):
        a = lib.tensor([3.0, -4.0], requires_grad=True)
        b = lib.tensor([[1.0, 2.0]], requires_grad=True)
        ((a * a).sum() + (b * 5).sum()).backward()
        total = lib.nn.utils.clip_grad_norm_([a, b], max_norm=2.0)
        inf_total = lib.nn.utils.clip_grad_norm_([a, b], max_norm=100.0, norm_type=float("inf"))
        lib.nn.utils.clip_grad_value_([a, b], 0.5)
        vec = lib.nn.utils.parameters_to_vector([a, b])
        ce = lib.nn.CrossEntropyLoss(label_smoothing=0.1)(lib.tensor([[1.0, 2.0, 0.5]]), lib.tensor([1]))
        mse = lib.nn.MSELoss()(lib.tensor([1.0, 3.0]), lib.tensor([0.0, 0.0]))
        out[lib.__name__] = (total.item(), inf_total.item(), a.grad.tolist(), b.grad.tolist(), vec.tolist(),
                             ce.item(), mse.item())
    np.testing.assert_allclose(np.array(out["trainrun"][0:2]), np.array(out["torch"][0:2]), rtol=1e-5)
    assert out["trainrun"][2:5] == out["torch"][2:5]
    np.testing.assert_allclose(np.array(out["trainrun"][5:]), np.array(out["torch"][5:]), rtol=1e-5)
    ml = tr.nn.ModuleList([tr.nn.Linear(2, 2), tr.nn.Identity()])
    assert len(ml) == 2 and len(list(ml.parameters())) == 2 and isinstance(ml[1], tr.nn.Identity)
    with pytest.warns(UserWarning, match="size_average and reduce"):  # PyTorch's legacy mapping, with its warning
        legacy = tr.nn.MSELoss(size_average=False)
    assert legacy.reduction == "sum" and legacy(tr.ones(2), tr.zeros(2)).item() == 2.0


def test_eye_linspace_lerp_addc_dot_outer_with_gradients_as_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    out = {}
    for lib in (tr, torch):
        a = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        b = lib.tensor([0.5, 4.0, -1.0], requires_grad=True)
        w = lib.tensor([0.25, 0.5, 0.75])
        y = (lib.lerp(a, b, w) * 2).sum() + lib.addcmul(a, a, b, value=0.5).sum() + \
            lib.addcdiv(b, a, b + 10, value=2).sum() + lib.dot(a, b) + lib.outer(a, b).sum() + a.lerp(b, 0.3).sum()
        y.backward()
        out[lib.__name__] = (y.item(), a.grad.tolist(), b.grad.tolist(), lib.eye(2, 3).tolist(),
                             lib.eye(3, dtype=lib.int64).tolist(), lib.linspace(-1, 1, 5).tolist(),
                             str(lib.linspace(0, 1, 3, dtype=lib.float64).dtype).split(".")[1])
    ours, theirs = out["trainrun"], out["torch"]
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)
    np.testing.assert_allclose(np.array(ours[1:3]), np.array(theirs[1:3]), rtol=1e-5)
    assert ours[3:] == theirs[3:]


def test_state_dict_keys_follow_pytorchs_order():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    keys = []
    for lib in (tr, torch):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = lib.nn.Conv2d(1, 2, 3)
                self.bn = lib.nn.BatchNorm2d(2)
                self.head = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.ReLU(), lib.nn.Linear(3, 2))

            def forward(self, x):
                return x

        keys.append(list(Net().state_dict()))
    assert keys[0] == keys[1]
    sd = tr.nn.Linear(2, 2).state_dict()
    assert isinstance(sd, dict) and list(sd) == ["weight", "bias"]
    fresh = tr.nn.Linear(2, 2)
    fresh.load_state_dict(sd)
    assert fresh.weight.tolist() == sd["weight"].tolist()



def test_losses_take_pytorchs_arguments_and_match_its_values_and_gradients():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    logits = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0], [2.0, 2.0, -2.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    target = np.array([1, 2, 0, 2])
    weight = np.array([0.2, 1.0, 3.0], dtype=np.float32)
    cases = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(weight=True), dict(ignore_index=2),
             dict(weight=True, ignore_index=0, reduction="mean"), dict(label_smoothing=0.2)]
    for case in cases:
        got = {}
        for lib in (tr, torch):
            x = lib.tensor(logits, requires_grad=True)
            kwargs = dict(case)
            if kwargs.pop("weight", False):
                kwargs["weight"] = lib.tensor(weight)
            t = lib.tensor(target)
            ce = lib.nn.functional.cross_entropy(x, t, **kwargs)
            nll_kwargs = {k: v for k, v in kwargs.items() if k != "label_smoothing"}
            nll = lib.nn.functional.nll_loss(lib.nn.functional.log_softmax(x, dim=1), t, **nll_kwargs)
            module = lib.nn.CrossEntropyLoss(**kwargs)(x, t)
            (ce.sum() + nll.sum() + module.sum()).backward()
            got[lib.__name__] = (ce.detach().tolist(), nll.detach().tolist(), module.detach().tolist(),
                                 x.grad.tolist())
        for ours, theirs in zip(got["trainrun"], got["torch"]):
            np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-5, atol=1e-6, err_msg=str(case))
    for reduction in ("mean", "sum", "none"):
        a, b = np.array([1.0, -3.0, 2.5], dtype=np.float32), np.array([0.5, 0.0, 4.0], dtype=np.float32)
        for name, module in (("mse_loss", "MSELoss"), ("l1_loss", "L1Loss")):
            ours = getattr(tr.nn.functional, name)(tr.tensor(a), tr.tensor(b), reduction=reduction)
            theirs = getattr(torch.nn.functional, name)(torch.tensor(a), torch.tensor(b), reduction=reduction)
            assert ours.tolist() == pytest.approx(theirs.tolist())
            assert getattr(tr.nn, module)(reduction=reduction)(tr.tensor(a), tr.tensor(b)).tolist() == \
                pytest.approx(theirs.tolist())
    with pytest.raises(ValueError, match="reduction"):
        tr.nn.functional.mse_loss(tr.ones(2), tr.ones(2), reduction="avg")


def test_load_refuses_what_it_cannot_honour_and_losses_keep_their_options(tmp_path):
    tr.save({"a": tr.ones(2)}, str(tmp_path / "a.safetensors"))
    with pytest.raises(NotImplementedError, match="encoding not supported"):  # (mmap=True is accepted)
        tr.load(tmp_path / "a.safetensors", mmap=True, encoding="latin1")
    assert tr.load(tmp_path / "a.safetensors", mmap=True)["a"].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="map_location must be a device, its name, a dict of locations or a function"):
        tr.load(tmp_path / "a.safetensors", map_location=3)
    assert tr.load(tmp_path / "a.safetensors", map_location=tr.device("cpu"))["a"].tolist() == [1.0, 1.0]
    ce = tr.nn.CrossEntropyLoss(ignore_index=3, label_smoothing=0.1)
    assert (ce.reduction, ce.ignore_index, ce.label_smoothing, ce.weight) == ("mean", 3, 0.1, None)
    assert tr.nn.L1Loss(reduction="sum").reduction == "sum"
