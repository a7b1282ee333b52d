"""One decode step of a Llama-architecture model on CPU, without transformers' per-layer machinery.

Why not `model(...)`: a profile of the embedded model's batched decode step (2 cores, bfloat16, 32
rows at 200 tokens of context) spent 63% of its time in PyTorch's CPU flash-attention kernel,
3.1 ms a layer for one query token a row; the same attention as two batched matmuls and a softmax
takes 0.5 ms. transformers' forward also rebuilds masks and rotary tables, casts every norm to
float32 and back and calls seven projections a layer. This step keeps what the decode loop needs:

- **The model's own weights.** float32 reads each parameter as it is (no copy: a step computes
  what transformers' forward computes up to rounding, log-probs within 1e-3 and the same greedy
  tokens in the tests).
  bfloat16 fuses q/k/v and gate/up into one matrix each and, where oneDNN is present, reorders
  them once into its blocked layout (a single-row bfloat16 projection runs about 1.4x faster
  packed). These copies follow the weights: `refresh()` rebuilds them when any parameter was
  changed in place (an optimizer step, `load_state_dict`, a merged adapter: each bumps the
  tensor's version counter), so the trainer's sampling copy never decodes with stale weights.
- **Grouped-query attention as matmuls** over the cache's filled part, with the padding of a
  left-padded batch masked by an additive bias and the softmax in float32.
- **The same KV cache.** Keys and values go through the cache layer's `update`, so the prefix
  store, row pruning and `row_from_batch` see what transformers' forward would have left there.

Only plain Llama layers qualify (`unsupported_reason` says why a model does not: another
architecture, LoRA-wrapped projections, biases, a GPU); everything else decodes through
transformers' forward as before. Prefill stays there too: a long prompt is compute-bound, and
its per-layer overhead is paid once a prompt, not once a token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

Linear = Callable[[torch.Tensor], torch.Tensor]


def unsupported_reason(model: Any) -> str | None:
    """Why `model` cannot use the fast step (None when it can)."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) != "llama":
        return f"architecture {getattr(config, 'model_type', None)!r} (only llama)"
    if model.device.type != "cpu":
        return f"device {model.device.type} (CPU only)"
    if getattr(config, "hidden_act", "silu") != "silu" or getattr(config, "pretraining_tp", 1) != 1:
        return "activation or tensor-parallel layout"
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or getattr(model, "lm_head", None) is None:
        return "no model.layers / lm_head"
    for layer in layers:
        attn, mlp = layer.self_attn, layer.mlp
        for proj in (
            attn.q_proj,
            attn.k_proj,
            attn.v_proj,
            attn.o_proj,
            mlp.gate_proj,
            mlp.up_proj,
            mlp.down_proj,
        ):
            if type(proj) is not torch.nn.Linear:
                return f"a {type(proj).__name__} projection (an adapter wraps it)"
            if proj.bias is not None:
                return "projection biases"
    return None


def _packed(weight: torch.Tensor) -> Linear:
    """A projection by `weight`, in oneDNN's blocked layout where that is available (bfloat16)."""
    if torch.backends.mkldnn.is_available():
        try:
            blocked = torch.ops.mkldnn._reorder_linear_weight(weight)
        except RuntimeError:
            # oneDNN has no kernel for this dtype on this CPU (bfloat16 without AVX-512 or
            # AVX-NE-CONVERT): the plain projection computes the same, emulated.
            return lambda x: F.linear(x, weight)
        return lambda x: torch.ops.mkldnn._linear_pointwise(x, blocked, None, "none", [], "")
    return lambda x: F.linear(x, weight)


def _projection(*weights: torch.Tensor, fuse: bool) -> Linear:
    """A projection by one weight, or by several with their outputs concatenated: fused into one
    packed matrix (a copy) when `fuse`, else reading the weights themselves."""
    if fuse:
        return _packed(weights[0] if len(weights) == 1 else torch.cat(weights, dim=0))
    if len(weights) == 1:
        weight = weights[0]
        return lambda x: F.linear(x, weight)
    return lambda x: torch.cat([F.linear(x, w) for w in weights], dim=-1)


@dataclass
class _Layer:
    """One decoder layer's projections (`qkv` gives q|k|v, `gate_up` gives gate|up) and norms."""

    qkv: Linear
    out: Linear
    gate_up: Linear
    down: Linear
    norm_in: torch.Tensor
    norm_post: torch.Tensor


class FastDecoder:
    """The decode step of one Llama model (build it with `for_model`)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        config = model.config
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(getattr(config, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // self.heads)
        self.eps = float(config.rms_norm_eps)
        self.scale = self.head_dim**-0.5
        self._layers: list[_Layer] = []
        self._head: Linear | None = None  # built by refresh()
        self._versions: tuple[int, ...] | None = None
        self.rebuilds = 0  # how often the weight copies were rebuilt (tests, logs)

    @classmethod
    def for_model(cls, model: Any) -> FastDecoder | None:
        """A decoder for `model`, or None where it does not qualify (see `unsupported_reason`)."""
        return cls(model) if unsupported_reason(model) is None else None

    def refresh(self) -> None:
        """Rebuild the weight copies if any parameter changed since the last build (cheap otherwise).

        Called once per decode batch, under the model lock: weights do not change within a batch.
        """
        sources = list(self.model.parameters())
        versions = tuple(t._version for t in sources) + tuple(t.data_ptr() for t in sources)
        if versions == self._versions:
            return
        inner = self.model.model
        fuse = sources[0].dtype == torch.bfloat16
        layers = []
        for layer in inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            layers.append(
                _Layer(
                    qkv=_projection(attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, fuse=fuse),
                    out=_projection(attn.o_proj.weight, fuse=fuse),
                    gate_up=_projection(mlp.gate_proj.weight, mlp.up_proj.weight, fuse=fuse),
                    down=_projection(mlp.down_proj.weight, fuse=fuse),
                    norm_in=layer.input_layernorm.weight,
                    norm_post=layer.post_attention_layernorm.weight,
                )
            )
        self._layers = layers
        self._head = _projection(self.model.lm_head.weight, fuse=fuse)
        self._versions = versions
        self.rebuilds += 1

    def step(
        self, tokens: torch.Tensor, positions: torch.Tensor, attention: torch.Tensor, cache: Any
    ) -> torch.Tensor:
        """Logits (float32, [rows, vocab]) of the token after `tokens` ([rows] ids at `positions`
        [rows, 1]); `attention` ([rows, cached + 1], 0 on padding) covers the cache and this token,
        whose keys and values the step appends to `cache`."""
        if self._head is None:
            raise RuntimeError("FastDecoder.step before refresh(): its weight copies are not built")
        inner = self.model.model
        rows = tokens.shape[0]
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        x = inner.embed_tokens(tokens)
        cos, sin = inner.rotary_emb(x[:, None], positions)  # [rows, 1, dim]
        bias = torch.zeros(attention.shape, dtype=torch.float32, device=attention.device)
        bias = bias.masked_fill_(attention == 0, float("-inf"))[:, None, :, None]  # [rows, 1, tokens, 1]
        half, group = dim // 2, heads // kv_heads
        for index, layer in enumerate(self._layers):
            h = _rms_norm(x, layer.norm_in, self.eps)
            qkv = layer.qkv(h).view(rows, heads + 2 * kv_heads, dim)
            qk = qkv[:, : heads + kv_heads]
            rotated = torch.cat((-qk[..., half:], qk[..., :half]), dim=-1)
            qk = qk * cos + rotated * sin
            key = qk[:, heads:, None, :]
            value = qkv[:, heads + kv_heads :, None, :]
            keys, values = cache.layers[index].update(key, value)
            query = qk[:, :heads].reshape(rows, kv_heads, group, dim)
            attended = _attention(query, keys, values, bias, self.scale).reshape(rows, heads * dim)
            x = x + layer.out(attended)
            h = _rms_norm(x, layer.norm_post, self.eps)
            gate, up = layer.gate_up(h).chunk(2, dim=-1)
            x = x + layer.down(F.silu(gate) * up)
        x = _rms_norm(x, inner.norm.weight, self.eps)
        return self._head(x).float()


def _attention(
    query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor, scale: float
) -> torch.Tensor:
    """Grouped-query attention of one token a row: query [rows, kv, group, dim] over keys and
    values [rows, kv, tokens, dim], with `bias` [rows, 1, tokens, 1] hiding padding.

    The cache's filled part is a view into a buffer with spare room. Several bfloat16 rows compute
    scores as keys @ query, because oneDNN copies such a view whole when it is a transposed right
    operand (32 rows x 1,000 tokens: a decode step took 202 ms that way, 156 ms this way). One row
    attends in float32 (MKL takes any layout), since oneDNN's bfloat16 matmul costs ~40 us a call
    whatever its size (a step at 1,000 tokens: 24.5 ms against 29.4 ms).
    """
    if query.shape[0] == 1 or keys.dtype == torch.float32:
        keys, values = keys.float(), values.float()
        scores = torch.matmul(query.float(), keys.transpose(-1, -2)) * scale + bias.transpose(-1, -2)
        return torch.matmul(torch.softmax(scores, dim=-1), values).to(query.dtype)
    scores = torch.matmul(keys, query.transpose(-1, -2).contiguous()).float() * scale + bias
    weights = torch.softmax(scores, dim=-2).to(values.dtype).transpose(-1, -2)
    return torch.matmul(weights, values)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as one fused kernel (it accumulates in float32 whatever the input's dtype)."""
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
