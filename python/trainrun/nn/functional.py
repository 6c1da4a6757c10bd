"""trainrun.nn.functional: PyTorch's functional forms. Each is declared once,
in _functional_activations.py, _functional_losses.py,
_functional_layers.py, _functional_pooling.py, _functional_pooling_indices.py, _functional_3d.py,
_functional_dropout.py,
_functional_distance.py, _functional_embedding.py or _functional_sampling.py (or in C++ for the losses with
kernels of their own),
and bound here from the op table."""
from trainrun import _op_table
from trainrun.nn import (_functional_3d, _functional_activations, _functional_distance,  # noqa: F401
                         _functional_dropout, _functional_embedding, _functional_layers, _functional_losses,
                         _functional_pooling, _functional_pooling_indices, _functional_sampling,
                         _functional_fractional_pool)

globals().update(_op_table.functional())


def _with_indices(name):
    pool = globals()[name]

    def with_indices(*args, **kwargs):
        kwargs.pop("return_indices", None)
        return pool(*args, return_indices=True, **kwargs)
    with_indices.__name__ = name + "_with_indices"
    return with_indices


for _name in ("max_pool1d", "max_pool2d", "max_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
              "adaptive_max_pool3d", "fractional_max_pool2d", "fractional_max_pool3d"):
    globals()[_name + "_with_indices"] = _with_indices(_name)

upsample_nearest, upsample_bilinear = _functional_layers.upsample_nearest, _functional_layers.upsample_bilinear
native_channel_shuffle = _functional_layers.channel_shuffle
multi_head_attention_forward = _functional_layers.multi_head_attention_forward
