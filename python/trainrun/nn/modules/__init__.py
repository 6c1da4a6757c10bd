"""torch.nn.modules: PyTorch's module files (torch.nn.modules.conv, .batchnorm, .linear, ...), for the imports and
isinstance checks scripts write against them (`isinstance(m, nn.modules.batchnorm._BatchNorm)` to leave norms out
of weight decay, `from torch.nn.modules.conv import _ConvNd`). Each is a module of trainrun's classes under
PyTorch's names; the private bases (_ConvNd, _BatchNorm, _NormBase, _DropoutNd, _MaxPoolNd, ...) are abstract
classes the matching layers are registered with, so isinstance and issubclass answer as in PyTorch."""
import abc
import sys
import types

from trainrun import nn

# file -> names from trainrun.nn it holds
_FILES = {
    "module": ["Module"], "linear": ["Linear", "Identity", "Bilinear", "LazyLinear"],
    "conv": ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d",
             "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"],
    "lazy": [], "adaptive": ["AdaptiveLogSoftmaxWithLoss"],
    "batchnorm": ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d",
                  "LazyBatchNorm3d"],
    "instancenorm": ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
                     "LazyInstanceNorm3d"],
    "normalization": ["LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm", "CrossMapLRN2d"],
    "container": ["Container", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"],
    "dropout": ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"],
    "pooling": ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
                "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
                "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d", "FractionalMaxPool2d",
                "FractionalMaxPool3d"],
    "sparse": ["Embedding", "EmbeddingBag"],
    "rnn": ["RNNBase", "RNNCellBase", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"],
    "transformer": ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                    "TransformerDecoderLayer"],
    "activation": ["ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Softmin",
                   "LeakyReLU", "ELU", "CELU", "SELU", "GLU", "Hardtanh", "Hardswish", "Hardsigmoid", "Softplus",
                   "Softshrink", "Hardshrink", "Tanhshrink", "Softsign", "LogSigmoid", "Threshold", "PReLU", "RReLU",
                   "MultiheadAttention", "Softmax2d"],
    "loss": [n for n in dir(nn) if n.endswith("Loss")] + ["NLLLoss2d", "_Loss", "_WeightedLoss"],
    "padding": ["ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
                "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
                "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"],
    "pixelshuffle": ["PixelShuffle", "PixelUnshuffle"], "upsampling": ["Upsample", "UpsamplingNearest2d",
                                                                      "UpsamplingBilinear2d"],
    "flatten": ["Flatten", "Unflatten"], "fold": ["Fold", "Unfold"], "distance": ["CosineSimilarity",
                                                                                 "PairwiseDistance"],
    "channelshuffle": ["ChannelShuffle"],
}


def _abstract(name, members, doc):
    base = abc.ABCMeta(name, (), {"__doc__": doc, "__module__": "trainrun.nn.modules"})
    for member in members:
        base.register(getattr(nn, member))
    return base


# file -> (private base, the layers registered with it)
_BASES = {
    "conv": [("_ConvNd", ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]),
             ("_ConvTransposeNd", ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"])],
    "batchnorm": [("_NormBase", ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "InstanceNorm1d",
                                 "InstanceNorm2d", "InstanceNorm3d"]),
                  ("_BatchNorm", ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"])],
    "instancenorm": [("_InstanceNorm", ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"])],
    "dropout": [("_DropoutNd", ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                                "FeatureAlphaDropout"])],
    "pooling": [("_MaxPoolNd", ["MaxPool1d", "MaxPool2d", "MaxPool3d"]),
                ("_AvgPoolNd", ["AvgPool1d", "AvgPool2d", "AvgPool3d"]),
                ("_AdaptiveAvgPoolNd", ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d"]),
                ("_AdaptiveMaxPoolNd", ["AdaptiveMaxPool2d", "AdaptiveMaxPool3d"])],
    "padding": [("_ConstantPadNd", ["ConstantPad1d", "ConstantPad2d", "ZeroPad2d"]),
                ("_ReflectionPadNd", ["ReflectionPad1d", "ReflectionPad2d"]),
                ("_ReplicationPadNd", ["ReplicationPad1d", "ReplicationPad2d"])],
}


def _build():
    for file, names in _FILES.items():
        module = types.ModuleType(f"{__name__}.{file}", f"torch.nn.modules.{file}, as trainrun's classes")
        for n in names:
            if hasattr(nn, n):
                setattr(module, n, getattr(nn, n))
        for base, members in _BASES.get(file, []):
            setattr(module, base, _abstract(base, [m for m in members if hasattr(nn, m)],
                                            f"PyTorch's {base}: the layers of that kind are its (virtual) "
                                            "subclasses"))
        if file == "module":  # (the hooks on every module's calls live in torch.nn.modules.module)
            from trainrun.nn import _module_hooks
            for hook in ("register_module_forward_pre_hook", "register_module_forward_hook",
                         "register_module_full_backward_pre_hook", "register_module_full_backward_hook"):
                setattr(module, hook, getattr(_module_hooks, hook))
        if file == "lazy":
            from trainrun.nn._lazy import LazyModuleMixin
            module.LazyModuleMixin = LazyModuleMixin
        if file == "linear":
            from trainrun.nn._layers import NonDynamicallyQuantizableLinear
            module.NonDynamicallyQuantizableLinear = NonDynamicallyQuantizableLinear
        sys.modules[module.__name__] = module
        globals()[file] = module
        for n in names:
            if hasattr(nn, n):
                globals().setdefault(n, getattr(nn, n))


_build()
