"""trainrun.nn.functional: PyTorch's functional forms. Each is declared once,
in _functional_activations.py, _functional_losses.py,
_functional_layers.py, _functional_pooling.py, _functional_3d.py, _functional_dropout.py,
_functional_distance.py, _functional_embedding.py or _functional_sampling.py (or in C++ for the losses with
kernels of their own),
and bound here from the op table."""
from trainrun import _op_table
from trainrun.nn import (_functional_3d, _functional_activations, _functional_distance,  # noqa: F401
                         _functional_dropout, _functional_embedding, _functional_layers, _functional_losses,
                         _functional_pooling, _functional_sampling)

globals().update(_op_table.functional())
