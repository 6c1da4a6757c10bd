"""nn.TransformerEncoderLayer and nn.TransformerEncoder with PyTorch's
arguments, submodule names (self_attn, linear1, linear2, norm1, norm2,
dropout1, dropout2) and state_dict keys, so weights load across. As in
PyTorch, TransformerEncoder starts every layer as a copy of the one given."""
from trainrun.nn import functional as F
from trainrun.nn._containers import ModuleList
from trainrun.nn._cpp_layers import LayerNorm, Linear
from trainrun.nn._declared_modules import declared
from trainrun.nn._layers import MultiheadAttention
from trainrun.nn._module import Module

_Dropout = declared()["Dropout"]


class TransformerEncoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-05,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        if not bias:
            raise NotImplementedError("TransformerEncoderLayer(bias=False) is not supported")
        object.__setattr__(self, "_config", dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                                                  dropout=dropout, activation=activation,
                                                  layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                                                  norm_first=norm_first))
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first)
        self.linear1, self.linear2 = Linear(d_model, dim_feedforward), Linear(dim_feedforward, d_model)
        self.dropout, self.dropout1, self.dropout2 = _Dropout(dropout), _Dropout(dropout), _Dropout(dropout)
        self.norm1, self.norm2 = LayerNorm(d_model, eps=layer_norm_eps), LayerNorm(d_model, eps=layer_norm_eps)
        if isinstance(activation, str):
            if activation not in ("relu", "gelu"):
                raise ValueError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable, got "
                                 f"{activation!r}")
            activation = F.relu if activation == "relu" else F.gelu
        object.__setattr__(self, "activation", activation)
        object.__setattr__(self, "norm_first", norm_first)
        if device is not None or dtype is not None:
            self.to(dtype if dtype is not None else device)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        out = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                             is_causal=is_causal)[0]
        return self.dropout1(out)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        layers = []
        for _ in range(num_layers):  # copies of encoder_layer: the same initial weights, as PyTorch's deepcopy
            layer = TransformerEncoderLayer(**encoder_layer._config)
            layer.load_state_dict(encoder_layer.state_dict())
            layers.append(layer)
        self.layers = ModuleList(layers)
        self.num_layers = num_layers
        if norm is not None:
            self.norm = norm
        else:
            object.__setattr__(self, "norm", None)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(out) if self.norm is not None else out
