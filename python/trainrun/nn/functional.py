"""trainrun.nn.functional: PyTorch's functional forms. Each is declared once,
in _functional_activations.py, _functional_losses.py or
_functional_layers.py (or in C++ for the losses with kernels of their own),
and bound here from the op table."""
from trainrun import _op_table
from trainrun.nn import _functional_activations, _functional_layers, _functional_losses  # noqa: F401

globals().update(_op_table.functional())
