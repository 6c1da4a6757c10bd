"""trainrun.nn.functional: PyTorch's functional forms."""
from trainrun import _C

relu, gelu, sigmoid, tanh, silu = _C.relu, _C.gelu, _C.sigmoid, _C.tanh, _C.silu
softmax, log_softmax = _C.softmax, _C.log_softmax
cross_entropy, nll_loss, mse_loss, l1_loss = _C.nn.cross_entropy, _C.nn.nll_loss, _C.nn.mse_loss, _C.nn.l1_loss
conv2d, max_pool2d, avg_pool2d, layer_norm, embedding, dropout, one_hot = (
    _C.conv2d, _C.max_pool2d, _C.avg_pool2d, _C.layer_norm, _C.embedding, _C.dropout, _C.one_hot)
