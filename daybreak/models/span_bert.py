"""BERT with a span head for extractive question answering (SQuAD): start and end logits for every token.

``SpanBert(config)(x)`` takes the feature rows of daybreak.data.squad, ``x`` (N, 3, L) integer = input ids, token
type ids, attention mask, and returns logits (N, L, 2): ``[..., 0]`` start, ``[..., 1]`` end. The names follow
Hugging Face's ``BertForQuestionAnswering`` (``bert.*`` encoder, ``qa_outputs`` = Linear(hidden, 2)), so that a
published checkpoint's state dict maps onto it by name (see daybreak.models.hf_weights).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from daybreak.models import register_model
from daybreak.models.bert import BertConfig, BertEncoderModel, bert_config


class SpanBert(nn.Module):
    def __init__(self, config: BertConfig | None = None):
        super().__init__()
        self.config = config or BertConfig()
        self.bert = BertEncoderModel(self.config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(self.config.hidden_size, 2)
        nn.init.normal_(self.qa_outputs.weight, std=self.config.initializer_range)
        nn.init.zeros_(self.qa_outputs.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[1] != 3:
            raise ValueError(f"expected features (N, 3, L) = ids, token types, mask; got {tuple(x.shape)}")
        ids, types, mask = x[:, 0], x[:, 1], x[:, 2]
        out: torch.Tensor = self.qa_outputs(self.bert(ids, types, mask))
        return out


@register_model("bert_base_squad")
def bert_base_squad(**overrides: Any) -> SpanBert:
    """BERT-base encoder + span head (108,893,186 parameters with the 30,522-token vocabulary). Config fields can be
    overridden by keyword (e.g. ``num_hidden_layers=2`` for tests)."""
    overrides.pop("num_classes", None)
    return SpanBert(bert_config(**overrides))
