"""trainrun.nn.functional: PyTorch's functional forms."""
from trainrun import _C

relu, gelu, sigmoid, tanh = _C.relu, _C.gelu, _C.sigmoid, _C.tanh
softmax, log_softmax = _C.softmax, _C.log_softmax
cross_entropy, mse_loss = _C.nn.cross_entropy, _C.nn.mse_loss
