"""trainrun.library.opcheck, as PyTorch's: a custom op run on sample arguments to check what its registrations
claim: the declared mutations are the real ones (test_schema), a floating output of inputs that require grad has
an autograd formula (test_autograd_registration), and the fake gives the kernel's shapes and dtypes
(test_faketensor)."""
from trainrun import _C
from trainrun.library import FakeImplCtx, _op_of, _opcheck_fake_ctx


def opcheck(op, args, kwargs=None, *, test_utils=("test_schema", "test_autograd_registration", "test_faketensor"),
            raise_exception=True):
    """Checks a custom op on sample arguments, as PyTorch's opcheck: the declared mutations are the real ones
    (test_schema), a floating output of inputs that require grad has a formula (test_autograd_registration),
    and the fake gives the real outputs' shapes and dtypes (test_faketensor). Returns {test: "SUCCESS" | error}."""
    import trainrun
    target = _op_of(op)
    kwargs = kwargs or {}
    results = {}

    def clone(v):
        return v.detach().clone().requires_grad_(v.requires_grad) if _C._is_cpp_tensor(v) else v

    def run(name, check):
        try:
            check()
            results[name] = "SUCCESS"
        except Exception as e:  # noqa: BLE001 - each check's failure is its result
            if raise_exception:
                raise RuntimeError(f"opcheck({target._qualname}): {name} failed: {e}") from e
            results[name] = e

    def schema():  # the call checks the arguments; the inputs not in mutates_args must come back unchanged
        given = [clone(a) for a in args]
        before = [a.detach().clone() if _C._is_cpp_tensor(a) else None for a in given]
        target(*given, **kwargs)
        names = list(target._signature.parameters)
        for i, (a, b) in enumerate(zip(given, before)):
            name = names[i] if i < len(names) else str(i)
            if b is not None and name not in target._mutated and not trainrun.equal(a.detach(), b):
                raise RuntimeError(f"the kernel wrote to its argument '{name}', which is not in mutates_args; "
                                   f"declare it (mutates_args={{'{name}'}}) so that callers and autograd know")

    def autograd_registration():
        differentiable = any(_C._is_cpp_tensor(a) and a.requires_grad for a in args)
        if differentiable and target._backward is None and not target._mutated:
            out = target(*[clone(a) for a in args], **kwargs)
            outs = out if isinstance(out, (tuple, list)) else [out]
            if any(_C._is_cpp_tensor(o) and o.dtype.is_floating_point for o in outs):
                raise RuntimeError("the op's outputs require grad but it has no autograd formula "
                                   "(register_autograd)")

    def faketensor():
        real = target(*[clone(a) for a in args], **kwargs)
        meta = [trainrun.empty(list(a.shape), dtype=a.dtype, device="meta") if _C._is_cpp_tensor(a) else a
                for a in args]
        ctx = FakeImplCtx(for_opcheck=True)
        _opcheck_fake_ctx.append(ctx)
        try:
            fake = target(*meta, **kwargs)
        finally:
            _opcheck_fake_ctx.pop()
        reals = real if isinstance(real, (tuple, list)) else [real]
        fakes = fake if isinstance(fake, (tuple, list)) else [fake]
        if len(reals) != len(fakes):
            raise RuntimeError(f"the fake returned {len(fakes)} outputs, the kernel {len(reals)}")
        for i, (r, f) in enumerate(zip(reals, fakes)):
            if not _C._is_cpp_tensor(r):
                continue
            if not _C._is_cpp_tensor(f):
                raise RuntimeError(f"output {i}: the kernel gives a tensor, the fake a {type(f).__name__}")
            # (a fake with data-dependent sizes (get_ctx().new_dynamic_size()) is checked for rank and dtype)
            shapes_differ = (r.dim() != f.dim() if ctx.dynamic_sizes_made else tuple(r.shape) != tuple(f.shape))
            if shapes_differ or r.dtype != f.dtype:
                raise RuntimeError(f"output {i}: the kernel gives {r.dtype} {list(r.shape)}, the fake "
                                   f"{f.dtype} {list(f.shape)}")

    checks = {"test_schema": schema, "test_autograd_registration": autograd_registration,
              "test_faketensor": faketensor}
    for name in test_utils:
        if name not in checks:
            raise ValueError(f"opcheck: unknown test {name!r}; expected some of {sorted(checks)}")
        run(name, checks[name])
    return results
