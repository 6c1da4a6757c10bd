"""torch._dynamo.testing's backends for counting what trainrun.compile recorded: CompileCounter (a backend that
counts recordings and their ops, then runs them as recorded) and CompileCounterWithBackend (the same, then hands
the graph to another backend)."""


def _op_count(gm):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


class CompileCounter:
    """backend=CompileCounter(): frame_count is the number of recordings handed to it, op_count their ops."""

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += _op_count(gm)
        return gm.forward

    def clear(self):
        self.frame_count = 0
        self.op_count = 0


class CompileCounterWithBackend(CompileCounter):
    """CompileCounter that then compiles with `backend` (a name runs the recording as trainrun.compile's; a
    callable is called with the graph). graphs: the GraphModules handed to it."""

    def __init__(self, backend):
        super().__init__()
        self.backend = backend
        self.graphs = []

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        self.graphs.append(gm)
        if callable(self.backend):
            return self.backend(gm, example_inputs)
        return gm.forward

    def clear(self):
        super().clear()
        self.graphs = []
