"""nn.TransformerEncoderLayer and nn.TransformerEncoder with PyTorch's
arguments, submodule names (self_attn, linear1, linear2, norm1, norm2,
dropout1, dropout2) and state_dict keys, so weights load across. As in
PyTorch, TransformerEncoder starts every layer as a copy of the one given."""
import copy

from trainrun.nn import functional as F
from trainrun.nn._containers import ModuleList
from trainrun.nn._cpp_layers import LayerNorm, Linear
from trainrun.nn._declared_modules import declared
from trainrun.nn._layers import MultiheadAttention
from trainrun.nn._module import Module

_Dropout = declared()["Dropout"]


def _activation(activation, where):
    """"relu", "gelu" or a callable, as the layers' activation= takes it."""
    if not isinstance(activation, str):
        return activation
    if activation not in ("relu", "gelu"):
        raise ValueError(f"{where}: activation must be 'relu', 'gelu' or a callable, got {activation!r}")
    return F.relu if activation == "relu" else F.gelu


class TransformerEncoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-05,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        # (children in PyTorch's order: print(layer), named_parameters() and state_dict() list them so)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = _Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1, self.dropout2 = _Dropout(dropout), _Dropout(dropout)
        object.__setattr__(self, "activation", _activation(activation, "TransformerEncoderLayer"))
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
        # Copies of encoder_layer, weights included, as PyTorch's deepcopy: every layer starts alike.
        layers = [copy.deepcopy(encoder_layer) for _ in range(num_layers)]
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


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention to the encoder's memory, then the feed-forward block, with
    PyTorch's submodule names (self_attn, multihead_attn, linear1/2, norm1/2/3, dropout1/2/3)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-05,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = _Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1, self.dropout2, self.dropout3 = _Dropout(dropout), _Dropout(dropout), _Dropout(dropout)
        object.__setattr__(self, "activation", _activation(activation, "TransformerDecoderLayer"))
        object.__setattr__(self, "norm_first", norm_first)
        if device is not None or dtype is not None:
            self.to(dtype if dtype is not None else device)

    def _sa_block(self, x, mask, key_padding_mask, is_causal):
        return self.dropout1(self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                                            need_weights=False, is_causal=is_causal)[0])

    def _mha_block(self, x, memory, mask, key_padding_mask, is_causal):
        return self.dropout2(self.multihead_attn(x, memory, memory, attn_mask=mask, key_padding_mask=key_padding_mask,
                                                 need_weights=False, is_causal=is_causal)[0])

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))


class TransformerDecoder(Module):
    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        # Copies of decoder_layer, weights included, as PyTorch's deepcopy: every layer starts alike.
        layers = [copy.deepcopy(decoder_layer) for _ in range(num_layers)]
        self.layers = ModuleList(layers)
        self.num_layers = num_layers
        if norm is not None:
            self.norm = norm
        else:
            object.__setattr__(self, "norm", None)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """The encoder-decoder of "Attention Is All You Need", as PyTorch's nn.Transformer (final LayerNorms on
    both stacks; generate_square_subsequent_mask for the causal target mask)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-05,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        options = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                       layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **options), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **options), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps))
        object.__setattr__(self, "d_model", d_model)
        object.__setattr__(self, "nhead", nhead)
        object.__setattr__(self, "batch_first", batch_first)
        from trainrun.nn import init
        for p in self.parameters():  # PyTorch's _reset_parameters: xavier_uniform_ on every matrix
            if p.dim() > 1:
                init.xavier_uniform_(p)
        if device is not None or dtype is not None:
            self.to(dtype if dtype is not None else device)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batch_dim = 0 if self.batch_first else 1
        if src.dim() == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """-inf above the diagonal, 0 elsewhere: position i attends to positions <= i."""
        import trainrun
        return trainrun.triu(trainrun.full((sz, sz), float("-inf"), dtype=dtype), diagonal=1) if device is None \
            else trainrun.triu(trainrun.full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)
