"""torch._dynamo.eval_frame.OptimizedModule: the class of what trainrun.compile(module) returns."""


def __getattr__(name):
    if name == "OptimizedModule":
        from trainrun._compile import _optimized_module_class
        return _optimized_module_class()
    raise AttributeError(f"module 'trainrun._dynamo.eval_frame' has no attribute '{name}'")
