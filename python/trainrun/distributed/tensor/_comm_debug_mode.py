"""CommDebugMode, as PyTorch's torch.distributed.tensor.debug.CommDebugMode: while active, every collective
DTensor and fully_shard issue is counted, by op (torch.ops.c10d_functional.<op>), in total and per module of the
module stack it ran under (forward or backward), which global module hooks keep while the mode is on.

    with CommDebugMode() as comm_mode:
        model(x).sum().backward()
    comm_mode.get_comm_counts()[torch.ops.c10d_functional.all_reduce]
    print(comm_mode.generate_comm_debug_tracing_table(noise_level=0))

Modules are named as PyTorch's module tracker names them: the outermost by its class ("MLPModule"), the others
by their path under it ("MLPModule.net1"); "Global" holds every count. The tables' noise levels 0 and 1 are
PyTorch's (collective counts; with module types and sharded parameters' placements); levels 2 and 3 list no
tensor operations here, as only collectives are recorded."""
import json
import re

from trainrun.distributed.tensor import _redistribute


class CommDebugMode:
    def __init__(self):
        self.comm_counts = {}
        self.comm_module_counts = {}
        self.module_helper = {}  # fqn -> {"depth", "module_type", "parameters": {name: placements}}
        self._forward_stack, self._backward_stack, self._names, self._handles = [], [], {}, []

    # ---- recording ------------------------------------------------------------------------------------------
    def __enter__(self):
        from trainrun.nn.modules import module as hooks
        self.comm_counts.clear()
        self.comm_module_counts.clear()
        self.comm_module_counts["Global"] = {"forward": {}, "backward": {}}
        self.module_helper.clear()
        self.module_helper["Global"] = {"depth": 0}
        self._forward_stack, self._backward_stack, self._names = [], [], {}
        self._handles = [hooks.register_module_forward_pre_hook(self._forward_pre),
                         hooks.register_module_forward_hook(self._forward_post),
                         hooks.register_module_full_backward_pre_hook(self._backward_pre),
                         hooks.register_module_full_backward_hook(self._backward_post)]
        _redistribute._COUNTERS.append(self)
        return self

    def __exit__(self, *exc):
        _redistribute._COUNTERS.remove(self)
        for handle in self._handles:
            handle.remove()
        self._handles = []
        return False

    def _name_of(self, module):
        name = self._names.get(id(module))
        if name is None:
            parent = self._forward_stack[-1] if self._forward_stack else None
            child = None
            if parent is not None:
                child = next((n for n, m in parent[0].named_children() if m is module), None)
            name = f"{parent[1]}.{child}" if child is not None else type(module).__name__
            self._names[id(module)] = name
            self._describe(name, module)
        return name

    def _describe(self, name, module):
        info = {"depth": name.count(".") + 1, "module_type": str(type(module))}
        placements = {n: p.placements for n, p in module.named_parameters(recurse=False) if hasattr(p, "placements")}
        if placements:
            info["parameters"] = placements
        self.module_helper.setdefault(name, info)
        self.comm_module_counts.setdefault(name, {"forward": {}, "backward": {}})

    def _forward_pre(self, module, args):
        self._forward_stack.append((module, self._name_of(module)))

    def _forward_post(self, module, args, output):
        if self._forward_stack and self._forward_stack[-1][0] is module:
            self._forward_stack.pop()

    def _backward_pre(self, module, grad_output):
        self._backward_stack.append(self._name_of(module))

    def _backward_post(self, module, grad_input, grad_output):
        if self._backward_stack:
            self._backward_stack.pop()

    def record(self, kind):
        """One collective of `kind` (tensor/_redistribute.communicate calls it)."""
        from trainrun.distributed._c10d_functional_ops import op_of_kind
        op = op_of_kind(kind)
        self.comm_counts[op] = self.comm_counts.get(op, 0) + 1
        phase, stack = ("backward", self._backward_stack) if self._backward_stack else \
            ("forward", [name for _, name in self._forward_stack])
        for name in ["Global"] + list(dict.fromkeys(stack)):
            counts = self.comm_module_counts.setdefault(name, {"forward": {}, "backward": {}})[phase]
            counts[op] = counts.get(op, 0) + 1

    # ---- reading --------------------------------------------------------------------------------------------
    def get_total_counts(self):
        return sum(self.comm_counts.values())

    def get_comm_counts(self):
        """op (torch.ops.c10d_functional.<op>) -> count."""
        return dict(self.comm_counts)

    def get_sharding_info(self):
        """fqn -> {parameter name: placements} for the modules whose own parameters are DTensors."""
        return {name: dict(info["parameters"]) for name, info in self.module_helper.items() if "parameters" in info}

    def get_parameter_info(self):
        return self.get_sharding_info()

    def generate_comm_debug_tracing_table(self, noise_level=3):
        """The module tree, each module with its collectives in the forward and the backward pass (noise_level
        >= 1: its type and its sharded parameters' placements too)."""
        lines = []
        for name, info in self.module_helper.items():
            depth = info["depth"]
            indent = "  " * (2 * depth)
            lines.append(f"{indent}{name}")
            if noise_level > 0 and "module_type" in info:
                lines.append(f"{indent}*module type: {info['module_type']}")
                if "parameters" in info:
                    lines.append(f"{indent}*Parameter List")
                    lines += [f"{indent} *{p}: {placements}" for p, placements in info["parameters"].items()]
            counts = self.comm_module_counts.get(name, {})
            for phase, header in (("forward", "FORWARD PASS"), ("backward", "BACKWARD PASS")):
                if counts.get(phase):
                    lines.append(f"{indent}  {header}")
                    lines += [f"{'  ' * (2 * depth + 2)}*{op}: {n}" for op, n in counts[phase].items()]
        return "\n".join(lines) + "\n"

    def log_comm_debug_tracing_table_to_file(self, file_name="comm_mode_log.txt", noise_level=3):
        table = re.sub(r"\x1B\[[0-?]*[ -/]*[@-~]", "", self.generate_comm_debug_tracing_table(noise_level))
        with open(file_name, "w") as f:
            f.write(table)

    def generate_json_dump(self, file_name="comm_mode_log.json", noise_level=3):
        """The module tree as JSON: per module its fqn, type, sharded parameters and collective counts by pass."""
        def node(name):
            info, counts = self.module_helper[name], self.comm_module_counts.get(name, {})
            out = {"fqn": name, "module_type": info.get("module_type", ""),
                   "forward": {str(op): n for op, n in counts.get("forward", {}).items()},
                   "backward": {str(op): n for op, n in counts.get("backward", {}).items()}}
            if noise_level > 0 and "parameters" in info:
                out["parameters"] = {p: str(v) for p, v in info["parameters"].items()}
            return out
        with open(file_name, "w") as f:
            json.dump([node(name) for name in self.module_helper], f, indent=2)
