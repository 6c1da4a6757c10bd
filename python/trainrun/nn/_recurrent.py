"""Recurrent layers: RNN (tanh or relu), LSTM (with proj_size) and GRU, and
their one-step cells, with PyTorch's parameter names (weight_ih_l0,
weight_hh_l0_reverse, ...), gate order (LSTM: input, forget, cell, output;
GRU: reset, update, new), initialisation U(-1/sqrt(hidden), 1/sqrt(hidden)),
batch_first, bidirectional, inter-layer dropout, and (output, h_n) /
(output, (h_n, c_n)) results.

Each time step is a composite of matrix products and pointwise ops, so
autograd differentiates it through time; the input projection of every step
is one matrix product over the whole sequence."""
import math

import trainrun
from trainrun import _C
from trainrun.nn import functional as F
from trainrun.nn import init
from trainrun.nn._module import Module
from trainrun.nn.parameter import Parameter

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _cell_step(mode, x_proj, h, c, w_hh, b_hh, w_hr):
    """One step: x_proj is the input's projection (with its bias); returns (h, c)."""
    hh = F.linear(h, w_hh, b_hh)
    if mode == "RNN_TANH":
        return _C.tanh(x_proj + hh), None
    if mode == "RNN_RELU":
        return F.relu(x_proj + hh), None
    if mode == "LSTM":
        i, f, g, o = (x_proj + hh).chunk(4, -1)
        c = _C.sigmoid(f) * c + _C.sigmoid(i) * _C.tanh(g)
        h = _C.sigmoid(o) * _C.tanh(c)
        return (F.linear(h, w_hr) if w_hr is not None else h), c
    r_x, z_x, n_x = x_proj.chunk(3, -1)  # GRU
    r_h, z_h, n_h = hh.chunk(3, -1)
    r, z = _C.sigmoid(r_x + r_h), _C.sigmoid(z_x + z_h)
    n = _C.tanh(n_x + r * n_h)
    return (1 - z) * n + z * h, None


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"{type(self).__name__}: hidden_size and num_layers must be positive, got "
                             f"{hidden_size} and {num_layers}")
        if proj_size < 0 or (proj_size and mode != "LSTM"):
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU" if proj_size > 0
                             else "proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gates = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        out_size = proj_size or hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                layer_in = input_size if layer == 0 else out_size * directions
                shapes = [("weight_ih", [gates, layer_in]), ("weight_hh", [gates, out_size])]
                if bias:
                    shapes += [("bias_ih", [gates]), ("bias_hh", [gates])]
                if proj_size:
                    shapes.append(("weight_hr", [proj_size, hidden_size]))
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(_C.empty(shape)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()
        if dtype is not None:
            self.to(dtype)
        if device is not None:
            self.to(device)

    def flatten_parameters(self):
        """PyTorch's: packs the weights into one contiguous buffer for cuDNN. The recurrence here reads the
        parameters where they are, on every device, so there is nothing to pack; scripts call it after loading or
        moving a model, and it returns None as PyTorch's does."""
        return None

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for name in self._flat_weights_names:
            init.uniform_(getattr(self, name), -bound, bound)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s  # (PyTorch leaves nonlinearity out)

    def _weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda name: getattr(self, name + suffix) if name + suffix in self._flat_weights_names else None  # noqa
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _forward_packed(self, packed, hx):
        """A PackedSequence: the padded steps run with each sequence's state held after its last step (so a
        reverse direction starts at each one's own end), outputs packed back, h_n in the batch's order."""
        from trainrun.nn.utils.rnn import PackedSequence, pad_packed_sequence
        sorted_order = packed.sorted_indices
        plain = PackedSequence(packed.data, packed.batch_sizes, None, None)
        padded, lengths = pad_packed_sequence(plain)  # (T, B, *) in sorted order
        is_lstm = self.mode == "LSTM"
        if hx is not None and sorted_order is not None:
            index = sorted_order.to(padded.device)
            hx = (hx[0].index_select(1, index), hx[1].index_select(1, index)) if is_lstm else \
                hx.index_select(1, index)
        output, h_n, c_n = self._run(padded, hx, False, lengths.tolist())
        sizes = [int(b) for b in packed.batch_sizes.tolist()]
        data = _C.cat([output[t, :b] for t, b in enumerate(sizes)], 0)
        out = PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
        if packed.unsorted_indices is not None:
            back = packed.unsorted_indices.to(h_n.device)
            h_n = h_n.index_select(1, back)
            c_n = c_n.index_select(1, back) if c_n is not None else None
        return (out, (h_n, c_n)) if is_lstm else (out, h_n)

    def forward(self, input, hx=None):  # noqa: A002
        from trainrun.nn.utils.rnn import PackedSequence
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.dim()}D instead")
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)
        output, h_n, c_n = self._run(x, hx, unbatched)
        if unbatched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return (output, (h_n, c_n)) if self.mode == "LSTM" else (output, h_n)

    def _run(self, x, hx, unbatched, lengths=None):
        """The layers over time-major x (T, B, input_size): (output, h_n, c_n). With lengths, sequence b stops
        at step lengths[b]: its state holds from there and its outputs there are zero."""
        if x.shape[-1] != self.input_size:
            raise ValueError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                             f"{x.shape[-1]}")
        length, batch = x.shape[0], x.shape[1]
        directions = 2 if self.bidirectional else 1
        out_size = self.proj_size or self.hidden_size
        is_lstm = self.mode == "LSTM"
        h0, c0 = (hx if is_lstm else (hx, None)) if hx is not None else (None, None)
        if h0 is not None and unbatched:
            h0, c0 = h0.unsqueeze(1), (c0.unsqueeze(1) if c0 is not None else None)
        if h0 is None:
            h0 = x.new_zeros(self.num_layers * directions, batch, out_size)
        if is_lstm and c0 is None:
            c0 = x.new_zeros(self.num_layers * directions, batch, self.hidden_size)
        expected = (self.num_layers * directions, batch, out_size)
        if tuple(h0.shape) != expected:
            raise ValueError(f"Expected hidden size {expected}, got {tuple(h0.shape)}")
        h_n, c_n = [], []
        layer_input = x
        running = None
        if lengths is not None:  # running[t]: (B, 1) 1.0 where sequence b still runs at step t
            steps = _C.arange(length, dtype=_C.dtype.int64).unsqueeze(1)
            ends = trainrun.tensor(lengths, dtype=trainrun.int64)
            running = (steps < ends.unsqueeze(0)).to(x.dtype).to(x.device).unsqueeze(-1)  # (T, B, 1)
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                projected = F.linear(layer_input, w_ih, b_ih)  # every step's input projection at once
                k = layer * directions + direction
                h, c = h0[k], (c0[k] if is_lstm else None)
                steps = range(length - 1, -1, -1) if direction else range(length)
                per_step = [None] * length
                for t in steps:
                    new_h, new_c = _cell_step(self.mode, projected[t], h, c, w_hh, b_hh, w_hr)
                    if running is None:
                        h, c = new_h, new_c
                        per_step[t] = h
                    else:  # a finished sequence keeps its state; its output there is zero
                        keep = running[t]
                        h = new_h * keep + h * (1 - keep)
                        c = new_c * keep + c * (1 - keep) if is_lstm else None
                        per_step[t] = new_h * keep
                outputs.append(_C.stack(per_step, 0))
                h_n.append(h)
                if is_lstm:
                    c_n.append(c)
            layer_input = outputs[0] if directions == 1 else _C.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        return layer_input, _C.stack(h_n, 0), (_C.stack(c_n, 0) if is_lstm else None)


class RNN(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)


class LSTM(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         0, device, dtype)


class _CellBase(Module):
    def __init__(self, mode, input_size, hidden_size, bias, device, dtype):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, bias
        gates = _GATES[mode] * hidden_size
        self.weight_ih = Parameter(_C.empty([gates, input_size]))
        self.weight_hh = Parameter(_C.empty([gates, hidden_size]))
        if bias:
            self.bias_ih = Parameter(_C.empty([gates]))
            self.bias_hh = Parameter(_C.empty([gates]))
        bound = 1.0 / math.sqrt(hidden_size)
        for _, p in self._named_local_parameters():
            init.uniform_(p, -bound, bound)
        if dtype is not None:
            self.to(dtype)
        if device is not None:
            self.to(device)

    def _step(self, input, hx, cx):  # noqa: A002
        unbatched = input.dim() == 1
        x = input.unsqueeze(0) if unbatched else input
        if hx is None:
            hx = x.new_zeros(x.shape[0], self.hidden_size)
        elif unbatched:
            hx = hx.unsqueeze(0)
        if self.mode == "LSTM":
            cx = x.new_zeros(x.shape[0], self.hidden_size) if cx is None else (cx.unsqueeze(0) if unbatched else cx)
        biases = (self.bias_ih, self.bias_hh) if self.bias else (None, None)
        h, c = _cell_step(self.mode, F.linear(x, self.weight_ih, biases[0]), hx, cx, self.weight_hh, biases[1], None)
        if unbatched:
            h, c = h.squeeze(0), (c.squeeze(0) if c is not None else None)
        return h, c

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, bias, device,
                         dtype)

    def forward(self, input, hx=None):  # noqa: A002
        return self._step(input, hx, None)[0]


class LSTMCell(_CellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        h, c = self._step(input, *(hx if hx is not None else (None, None)))
        return h, c


class GRUCell(_CellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        return self._step(input, hx, None)[0]


RNNCellBase = _CellBase  # (PyTorch's name for the cells' base class)
