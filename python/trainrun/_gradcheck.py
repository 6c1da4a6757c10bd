"""torch.autograd.gradcheck and gradgradcheck: the analytical Jacobian (one backward per output element)
against central finite differences (one perturbation per input element), for each differentiable input and
output. Meant for small float64 inputs, as PyTorch's."""
import warnings

from trainrun import _C


class GradcheckError(RuntimeError):
    """What gradcheck raises when the gradients disagree (PyTorch's name)."""


def _tensors(values):
    return (values,) if _C._is_cpp_tensor(values) else tuple(values)


def _differentiable_outputs(func, inputs):
    return [o for o in _tensors(func(*inputs)) if _C._is_cpp_tensor(o) and o.is_floating_point()]


def _numerical_jacobian(func, inputs, index, output_count, eps):
    """columns[k][j] = d output k / d element j of inputs[index], by central differences."""
    import trainrun
    x = inputs[index]
    flat = x.detach().reshape([-1])  # shares x's memory when x is contiguous
    if not x.is_contiguous():
        raise ValueError(f"gradcheck: input {index} must be contiguous")
    columns = [[] for _ in range(output_count)]
    for j in range(flat.numel()):  # (grad mode stays on: func may itself differentiate, as gradgradcheck's)
        original = float(flat[j])
        flat[j] = original + eps
        plus = [o.detach().clone() for o in _differentiable_outputs(func, inputs)]
        flat[j] = original - eps
        minus = [o.detach().clone() for o in _differentiable_outputs(func, inputs)]
        flat[j] = original
        for k, (p, m) in enumerate(zip(plus, minus)):
            columns[k].append(((p - m) / (2 * eps)).reshape([-1]))
    return [trainrun.stack(c, 1) if c else None for c in columns]  # each (output numel, input numel)


def _analytical_jacobian(outputs, inputs, index):
    """rows[k]: d output k / d inputs[index], one backward per element of output k."""
    import trainrun
    rows = []
    for out in outputs:
        grads = []
        for i in range(out.numel()):
            seed = trainrun.zeros(list(out.shape), dtype=out.dtype).reshape([-1])
            seed[i] = 1.0
            if out.requires_grad:
                g = trainrun.autograd.grad([out], [inputs[index]], [seed.reshape(list(out.shape))],
                                           retain_graph=True, allow_unused=True)[0]
            else:
                g = None
            grads.append(trainrun.zeros(list(inputs[index].shape), dtype=out.dtype).reshape([-1]) if g is None
                         else g.reshape([-1]))
        rows.append(trainrun.stack(grads, 0) if grads else None)
    return rows


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """True when every differentiable output's gradient with respect to every input that requires grad
    matches finite differences within atol + rtol * |numerical|; otherwise raises GradcheckError (or returns
    False with raise_exception=False)."""
    inputs = _tensors(inputs)
    wanted = [i for i, t in enumerate(inputs) if _C._is_cpp_tensor(t) and t.requires_grad]
    if not wanted:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    for i in wanted:
        if inputs[i].dtype != _C.dtype.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. This check "
                          "will likely fail if all the inputs are not of double precision floating point.",
                          UserWarning, stacklevel=2)
    for i in wanted:
        outputs = _differentiable_outputs(func, inputs)  # (afresh: the perturbations write into the inputs)
        analytical = _analytical_jacobian(outputs, inputs, i)
        numerical = _numerical_jacobian(func, inputs, i, len(outputs), eps)
        for k, (a, n) in enumerate(zip(analytical, numerical)):
            if a is None or n is None:
                continue
            if not bool(((a - n).abs() <= atol + rtol * n.abs()).all()):
                if not raise_exception:
                    return False
                raise GradcheckError(f"Jacobian mismatch for output {k} with respect to input {i},\n"
                                     f"numerical:{n}\nanalytical:{a}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False,
                  raise_exception=True, nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """gradcheck of the gradient: the function (inputs, grad_outputs) -> d(func)/d(inputs) . grad_outputs,
    computed with create_graph=True (random grad_outputs unless given)."""
    import trainrun
    inputs = _tensors(inputs)
    outputs = _differentiable_outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = [trainrun.randn(list(o.shape), dtype=o.dtype).requires_grad_() for o in outputs]
    grad_outputs = list(_tensors(grad_outputs))
    wanted = [i for i, t in enumerate(inputs) if _C._is_cpp_tensor(t) and t.requires_grad]
    n = len(inputs)

    def first_derivatives(*values):
        ins, seeds = values[:n], values[n:]
        outs = _differentiable_outputs(func, ins)
        grads = trainrun.autograd.grad(outs, [ins[i] for i in wanted], list(seeds), create_graph=True,
                                       allow_unused=True)
        return tuple(g for g in grads if g is not None)
    return gradcheck(first_derivatives, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
