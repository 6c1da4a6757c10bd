"""torch.compile(backend=callable): the backend is handed what trainrun recorded, as torch hands a backend the
graph Dynamo traced: a trainrun.fx GraphModule of the program (its ops as recorded at the dispatcher, aten
targets, before fusion) and the call's input tensors (the arguments' tensors, then the module's parameters and
buffers). The callable it returns runs every replay of that recording with the same inputs; it gives the outputs
as a tuple (what the GraphModule gives), or the single output. The replays run with autograd recording op by op,
as the eager call does (trainrun's own backward recording is for its own backend)."""
from trainrun import _C


def _input_names(num_args, module):
    """Placeholder names, as Dynamo's: the argument tensors L_arg<i>_, then the module's tensors by name."""
    names = [f"L_arg{i}_" for i in range(num_args)]
    if module is not None:
        names += [f"L_self_{n.replace('.', '_')}_" for n, _ in module._named_local_parameters()]
        names += [f"L_self_{n.replace('.', '_')}_" for n, _ in module.named_buffers()]
    return names


def graph_module(graph, names, root=None, wrap_outputs=tuple):
    """The recorded program as a GraphModule whose forward runs it (with autograd) on new inputs: placeholders
    named `names` (one per input), the outputs given to wrap_outputs as a list."""
    from trainrun.export._graph import program_graph
    from trainrun.fx import GraphModule
    table = graph._table()
    constants = [(f"_tensor_constant{i}", "c") for i in range(len(table["constants"]))]

    def run(*inputs):
        if len(inputs) != len(names):
            raise TypeError(f"GraphModule.forward: the recorded program takes {len(names)} tensors "
                            f"({', '.join(names)}), got {len(inputs)}")
        return wrap_outputs(graph.run(list(inputs)))

    return GraphModule(root, program_graph(table, constants, names), run=run)


# Ops whose output is a new tensor: an in-place op on one of those writes nothing the caller can see.
_FRESH = {"empty_strided", "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
          "clone", "arange", "scalar_tensor"}
_RANDOM = ("rand", "bernoulli", "normal", "uniform", "multinomial", "exponential", "dropout", "poisson", "cauchy",
           "geometric")


def repeatable(gm):
    """Whether running the recorded program once more changes nothing outside it: no in-place op writes to
    anything but tensors the program made itself (inputs, parameters and buffers stay as they are), and no op
    draws random numbers (a second run would advance the generator again)."""
    fresh = set()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = str(node.target).split(".")[1] if "." in str(node.target) else str(node.target)
        if any(word in name for word in _RANDOM):
            return False
        if name.endswith("_"):
            target = node.args[0] if node.args else None
            if target not in fresh:
                return False
            fresh.add(node)  # (an in-place op returns its target)
        elif name in _FRESH:
            fresh.add(node)
    return True


def call_backend(backend, graph, tensors, module):
    """backend(gm, example_inputs), checked: (the callable replays will call, whether the recording is
    repeatable())."""
    num_module = len(_input_names(0, module))
    num_args = len(tensors) - num_module
    gm = graph_module(graph, _input_names(num_args, module), module)
    pure = repeatable(gm)
    example_inputs = list(tensors[:num_args])
    if module is not None:  # the module's own objects (its Parameters), where the call passes plain handles
        example_inputs += [t for _, t in module._named_local_parameters()] + [t for _, t in module.named_buffers()]
    compiled = backend(gm, example_inputs)
    if not callable(compiled):
        raise TypeError(f"compile: the backend {getattr(backend, '__name__', backend)!r} returned a "
                        f"{type(compiled).__name__}; a backend must return a callable (gm.forward, for one)")
    return compiled, pure


def run_compiled(compiled, tensors, num_outputs):
    """The outputs of a backend's callable, as a list of num_outputs."""
    result = compiled(*tensors)
    outputs = [result] if _C._is_cpp_tensor(result) else list(result)
    if len(outputs) != num_outputs:
        raise ValueError(f"compile: the backend's callable gave {len(outputs)} outputs; the recorded program has "
                         f"{num_outputs}")
    return outputs
