"""BERT-base (Devlin et al., 2018) in plain PyTorch: the encoder and the masked-LM head.

Module and parameter names follow the Hugging Face layout (``bert.embeddings.word_embeddings``,
``bert.encoder.layer.N.attention.self.query``, ``cls.predictions.transform.dense``, ...) so that a published
checkpoint's state dict maps onto these modules by name. Attention runs through
``torch.nn.functional.scaled_dot_product_attention`` (flash / memory-efficient kernels where available).

- ``BertEncoderModel``: embeddings + encoder (+ an optional pooler), returns the sequence output (B, L, hidden);
  put a task head (e.g. a span head for SQuAD) on it.
- ``BertForMaskedLM``: ``bert`` (an encoder without pooler) + ``cls.predictions`` (dense + GELU + LayerNorm,
  then a decoder whose weight is the word-embedding matrix, plus a per-token bias). 109,514,298 parameters
  for the base configuration (the tied decoder weight is counted once). Given ``masked_positions`` (B, P), the
  head scores only those positions, as BERT's pre-training does (``gather_indexes`` over ``masked_lm_positions``
  in Google's run_pretraining.py): the vocabulary projection, the largest matmul at short sequences, runs on
  B x P tokens instead of B x L.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from daybreak.models import register_model


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of "
                             f"num_attention_heads {self.num_attention_heads}")


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        length = input_ids.shape[1]
        if length > self.position_embeddings.num_embeddings:
            raise ValueError(f"sequence length {length} exceeds max_position_embeddings "
                             f"{self.position_embeddings.num_embeddings}")
        positions = torch.arange(length, device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions).unsqueeze(0)
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # every token of segment 0
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        out: torch.Tensor = self.dropout(self.LayerNorm(x))
        return out


class BertSelfAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.num_heads, self.head_dim).transpose(1, 2)  # B, H, L, D

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                             dropout_p=self.dropout_p if self.training else 0.0)
        b, _, length, _ = out.shape
        return out.transpose(1, 2).reshape(b, length, self.num_heads * self.head_dim)


class BertSelfOutput(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.LayerNorm(self.dropout(self.dense(hidden)) + residual)
        return out


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        out: torch.Tensor = self.output(self.self(x, mask), x)
        return out


class BertIntermediate(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = nn.GELU()  # the exact (erf) GELU, BERT's "gelu"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.intermediate_act_fn(self.dense(x))
        return out


class BertOutput(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.LayerNorm(self.dropout(self.dense(hidden)) + residual)
        return out


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.attention(x, mask)
        out: torch.Tensor = self.output(self.intermediate(x), x)
        return out


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x, mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.activation(self.dense(sequence_output[:, 0]))
        return out


def _init_weights(module: nn.Module, std: float) -> None:
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=std)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def attention_mask_to_sdpa(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, L) with 1 = real token, 0 = padding -> a boolean (B, 1, 1, L) mask (True = attend), or None."""
    if attention_mask is None:
        return None
    return attention_mask.to(torch.bool)[:, None, None, :]


class BertEncoderModel(nn.Module):
    """Embeddings + transformer encoder. ``forward`` returns the sequence output (B, L, hidden)."""

    def __init__(self, config: BertConfig | None = None, add_pooling_layer: bool = False):
        super().__init__()
        self.config = config or BertConfig()
        self.embeddings = BertEmbeddings(self.config)
        self.encoder = BertEncoder(self.config)
        self.pooler = BertPooler(self.config) if add_pooling_layer else None
        _init_weights(self, self.config.initializer_range)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embeddings(input_ids, token_type_ids)
        out: torch.Tensor = self.encoder(x, attention_mask_to_sdpa(attention_mask))
        return out

    def pooled(self, sequence_output: torch.Tensor) -> torch.Tensor:
        if self.pooler is None:
            raise RuntimeError("this encoder was built without a pooler (add_pooling_layer=False)")
        out: torch.Tensor = self.pooler(sequence_output)
        return out


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = nn.GELU()
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.LayerNorm(self.transform_act_fn(self.dense(x)))
        return out


class BertLMPredictionHead(nn.Module):
    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied: one matrix for input embedding and output projection
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.decoder(self.transform(x)) + self.bias
        return out


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.predictions = BertLMPredictionHead(config, word_embeddings)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.predictions(sequence_output)
        return out


def gather_positions(sequence_output: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """(B, L, H) and (B, P) token positions -> (B, P, H): each sequence's hidden states at its positions."""
    index = positions.unsqueeze(-1).expand(-1, -1, sequence_output.shape[-1])
    return torch.gather(sequence_output, 1, index)


class BertForMaskedLM(nn.Module):
    """The encoder with the masked-LM head: ``forward(input_ids)`` -> logits (B, L, vocab);
    ``forward(input_ids, masked_positions=P)`` -> logits (B, P, vocab) of the masked positions only."""

    def __init__(self, config: BertConfig | None = None):
        super().__init__()
        self.config = config or BertConfig()
        self.bert = BertEncoderModel(self.config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(self.config, self.bert.embeddings.word_embeddings)
        _init_weights(self.cls, self.config.initializer_range)
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight  # re-tie after init

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None,
                masked_positions: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.bert(input_ids, token_type_ids, attention_mask)
        if masked_positions is not None:
            hidden = gather_positions(hidden, masked_positions)
        out: torch.Tensor = self.cls(hidden)
        return out


def bert_config(**overrides: Any) -> BertConfig:
    known = {f.name for f in fields(BertConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(f"unknown BERT config field(s): {', '.join(unknown)}")
    return BertConfig(**overrides)


@register_model("bert_base")
def bert_base(**overrides: Any) -> BertForMaskedLM:
    """BERT-base with the masked-LM head (109,514,298 parameters). Config fields can be overridden by keyword."""
    overrides.pop("num_classes", None)  # a generic caller may pass it; the MLM head predicts the vocabulary
    return BertForMaskedLM(bert_config(**overrides))

