"""The layers derive measures, built in PyTorch eager (bfloat16, CPU).

``GPTLayer`` follows the assumptions of Korthikanti et al. 2022, section 4.1:
pre-LayerNorm, fused QKV with biases, materialised ``[b, a, s, s]`` scores,
softmax, dropout on the probabilities, the projection and the MLP output
(``torch.native_dropout``, which keeps a 1-byte mask), fc1 -> GELU -> fc2 with
f = 4h, ``[s, b, h]`` layout as Megatron-LM lays it out. ``LlamaLayer`` is the
``eager`` profile: ``nn.RMSNorm``, q/k/v linears with g kv heads (GQA), RoPE
from precomputed cos/sin buffers (rotate-half form), ``F.scaled_dot_product_attention``
(causal, ``enable_gqa``), SiLU(gate) * up, down projection, no dropout, no biases.
``LlamaModel`` adds the edges: embedding, final RMSNorm, untied head, cross-entropy.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

DTYPE = torch.bfloat16
DROPOUT = 0.1
ROPE_THETA = 10000.0


class GPTLayer(nn.Module):
    """One GPT layer under Korthikanti et al. 2022's assumptions (section 4.1)."""

    def __init__(self, s: int, h: int, a: int, f: int) -> None:
        super().__init__()
        self.heads, self.head_dim = a, h // a
        self.input_layernorm = nn.LayerNorm(h, dtype=DTYPE)
        self.query_key_value = nn.Linear(h, 3 * h, dtype=DTYPE)
        self.dense = nn.Linear(h, h, dtype=DTYPE)
        self.post_attention_layernorm = nn.LayerNorm(h, dtype=DTYPE)
        self.dense_h_to_4h = nn.Linear(h, f, dtype=DTYPE)
        self.dense_4h_to_h = nn.Linear(f, h, dtype=DTYPE)
        # An additive causal mask: a buffer, and adding it saves nothing for backward.
        causal = torch.full((s, s), float("-inf"), dtype=DTYPE).triu(1)
        self.register_buffer("causal_mask", causal, persistent=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """QK^T / sqrt(d), causal softmax, dropout, times V: every [b, a, s, s] tensor materialised."""
        s, b, _ = x.shape
        qkv = self.query_key_value(x).view(s, b, self.heads, 3 * self.head_dim)
        q, k, v = qkv.split(self.head_dim, dim=-1)          # [s, b, a, d] views
        q, v = q.permute(1, 2, 0, 3), v.permute(1, 2, 0, 3)  # [b, a, s, d]
        k = k.permute(1, 2, 3, 0)                            # [b, a, d, s]
        scores = torch.matmul(q, k) * (1.0 / math.sqrt(self.head_dim)) + self.causal_mask
        probs = torch.softmax(scores, dim=-1)
        probs, _ = torch.native_dropout(probs, DROPOUT, True)
        context = torch.matmul(probs, v)                     # [b, a, s, d]
        return context.permute(2, 0, 1, 3).reshape(s, b, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attended = self.dense(self.attention(self.input_layernorm(x)))
        x = x + torch.native_dropout(attended, DROPOUT, True)[0]
        hidden = F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(x)))
        return x + torch.native_dropout(self.dense_4h_to_h(hidden), DROPOUT, True)[0]


def rope_tables(s: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, [s, head_dim] (Su et al. 2021, rotate-half layout)."""
    inv_freq = ROPE_THETA ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(s, dtype=torch.float32), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(DTYPE), angles.sin().to(DTYPE)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x cos + rotate_half(x) sin; multiplying by buffers saves only the buffers."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


class LlamaLayer(nn.Module):
    """One Llama layer in the eager profile: RMSNorm, GQA + RoPE + SDPA, SwiGLU (Llama 3 paper, Table 3)."""

    def __init__(self, s: int, h: int, a: int, g: int, f: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = a, g, h // a
        self.attention_norm = nn.RMSNorm(h, dtype=DTYPE)
        self.wq = nn.Linear(h, h, bias=False, dtype=DTYPE)
        self.wk = nn.Linear(h, g * self.head_dim, bias=False, dtype=DTYPE)
        self.wv = nn.Linear(h, g * self.head_dim, bias=False, dtype=DTYPE)
        self.wo = nn.Linear(h, h, bias=False, dtype=DTYPE)
        self.ffn_norm = nn.RMSNorm(h, dtype=DTYPE)
        self.w1 = nn.Linear(h, f, bias=False, dtype=DTYPE)
        self.w3 = nn.Linear(h, f, bias=False, dtype=DTYPE)
        self.w2 = nn.Linear(f, h, bias=False, dtype=DTYPE)
        cos, sin = rope_tables(s, self.head_dim)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """Causal GQA through F.scaled_dot_product_attention with enable_gqa."""
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, self.rope_cos, self.rope_sin), rotate(k, self.rope_cos, self.rope_sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))

    def mlp(self, normed: torch.Tensor) -> torch.Tensor:
        """SiLU(gate) * up, then the down projection."""
        return self.w2(F.silu(self.w1(normed)) * self.w3(normed))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.mlp(self.ffn_norm(x))


class LlamaModel(nn.Module):
    """Embedding, ``layers`` Llama layers, final RMSNorm, untied head, cross-entropy loss."""

    def __init__(self, layers: int, vocab: int, s: int, h: int, a: int, g: int, f: int) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, h, dtype=DTYPE)
        self.layers = nn.ModuleList(LlamaLayer(s, h, a, g, f) for _ in range(layers))
        self.norm = nn.RMSNorm(h, dtype=DTYPE)
        self.output = nn.Linear(h, vocab, bias=False, dtype=DTYPE)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
