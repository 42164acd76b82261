"""Load Hugging Face-format BERT weights from a local directory (no hub access) into daybreak's BERT modules.

A directory as ``save_pretrained`` writes it: ``config.json`` and ``model.safetensors`` (read with the
``safetensors`` package) or ``pytorch_model.bin`` (read with ``torch.load(weights_only=True)``: tensors only, no
code runs). Names are mapped onto the target module by name:

- ``bert.embeddings.*``, ``bert.encoder.layer.N.*``: daybreak's BERT uses the same names;
- a checkpoint of a bare ``BertModel`` (``embeddings.*``, ``encoder.*``) gets the ``bert.`` prefix;
- the legacy LayerNorm names ``gamma`` / ``beta`` (old TensorFlow conversions) become ``weight`` / ``bias``;
- tensors the target has no place for (the pre-training heads ``cls.*``, the pooler, ``position_ids``) are
  ignored; target tensors the checkpoint lacks (a fresh ``qa_outputs`` head) keep their initialization.

The architecture comes from the recipe, and ``config.json`` must agree with it (a one-line error names the
first field that differs), so that a run's hyperparameters always say which model it trained.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from daybreak.errors import ConfigError
from daybreak.models.bert import BertConfig

SAFETENSORS_FILE = "model.safetensors"
PYTORCH_FILE = "pytorch_model.bin"
CONFIG_FILE = "config.json"

# config.json field -> BertConfig field (same names) that must match the model being loaded into.
_ARCHITECTURE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size", "max_position_embeddings", "type_vocab_size")


@dataclass
class LoadReport:
    source: Path
    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the model, not in the checkpoint (kept as initialized)
    ignored: list[str] = field(default_factory=list)  # in the checkpoint, not in the model

    def summary(self) -> str:
        """One line: how many tensors came from where, which stayed fresh and which were ignored."""
        parts = [f"loaded {len(self.loaded)} tensors from {self.source}"]
        if self.missing:
            parts.append("newly initialized: " + _collapse(self.missing))
        if self.ignored:
            parts.append("ignored: " + _collapse(self.ignored))
        return "; ".join(parts)


def _collapse(names: list[str], limit: int = 6) -> str:
    """``cls.predictions.bias, cls.predictions.transform.dense.weight, ...`` -> ``cls.* (5)``; short lists as is."""
    groups: dict[str, list[str]] = {}
    for name in names:
        head = ".".join(name.split(".")[:2]) if name.startswith("bert.") else name.split(".")[0]
        groups.setdefault(head, []).append(name)
    shown = [g[0] if len(g) == 1 else f"{head}.* ({len(g)})" for head, g in groups.items()]
    return ", ".join(shown[:limit]) + (f", ... ({len(shown) - limit} more groups)" if len(shown) > limit else "")


def read_hf_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise ConfigError(f"init_from {directory}: no {CONFIG_FILE} there (a Hugging Face model directory has one)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"init_from {path}: not readable JSON ({' '.join(str(e).split())})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"init_from {path}: expected a JSON object")
    return config


def check_config(config: dict[str, Any], model_config: BertConfig, directory: Path,
                 hint: dict[str, str] | None = None) -> None:
    """``config.json`` must describe the model being built. ``hint`` maps a field to the hyperparameter setting it."""
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise ConfigError(f"init_from {directory}: model_type {model_type!r} is not a BERT checkpoint")
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise ConfigError(f"init_from {directory}: hidden_act {act!r}; this BERT uses the exact (erf) GELU, 'gelu'")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ConfigError(f"init_from {directory}: position_embedding_type {position!r} is not supported (absolute)")
    for name in _ARCHITECTURE_FIELDS:
        if name in config and (isinstance(config[name], bool) or not isinstance(config[name], int)):
            raise ConfigError(f"init_from {directory}: {CONFIG_FILE} has {name}={config[name]!r}, not an integer")
        if name in config and config[name] != getattr(model_config, name):
            how = f"; pass --set {hint[name]}={config[name]}" if hint and name in hint else ""
            raise ConfigError(f"init_from {directory}: {CONFIG_FILE} has {name}={config[name]} but the model has "
                              f"{getattr(model_config, name)}{how}")


def read_hf_state_dict(directory: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The checkpoint's tensors: model.safetensors if present, else pytorch_model.bin."""
    safetensors_path = directory / SAFETENSORS_FILE
    bin_path = directory / PYTORCH_FILE
    if safetensors_path.is_file():
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise ConfigError(f"init_from {directory}: reading {SAFETENSORS_FILE} needs the safetensors package "
                              "(pip install safetensors)") from None
        try:
            return load_file(str(safetensors_path), device="cpu"), safetensors_path
        except Exception as e:  # noqa: BLE001 - any header/IO error of a corrupt file
            raise ConfigError(f"init_from {safetensors_path}: not a readable safetensors file "
                              f"({' '.join(str(e).split())[:200]})") from None
    if bin_path.is_file():
        try:
            state = torch.load(bin_path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unpickling/zip error means a corrupt or unsafe file
            raise ConfigError(f"init_from {bin_path}: not a readable PyTorch weights file "
                              f"({' '.join(str(e).split())[:200]})") from None
        if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
            state = state["state_dict"]
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise ConfigError(f"init_from {bin_path}: expected a state dict of tensors")
        return state, bin_path
    raise ConfigError(f"init_from {directory}: neither {SAFETENSORS_FILE} nor {PYTORCH_FILE} there")


def hf_to_daybreak_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a Hugging Face BERT state dict to daybreak's names (see the module doc)."""
    out: dict[str, torch.Tensor] = {}
    bare = not any(k.startswith("bert.") for k in state) and any(k.startswith(("embeddings.", "encoder."))
                                                                 for k in state)
    for key, value in state.items():
        name = key[len("module."):] if key.startswith("module.") else key
        if bare and name.startswith(("embeddings.", "encoder.", "pooler.")):
            name = "bert." + name
        if name.endswith(".gamma"):
            name = name[: -len(".gamma")] + ".weight"
        elif name.endswith(".beta"):
            name = name[: -len(".beta")] + ".bias"
        out[name] = value
    return out


def load_hf_bert(model: nn.Module, directory: str | os.PathLike[str], *, config: BertConfig | None = None,
                 hint: dict[str, str] | None = None) -> LoadReport:
    """Copy the checkpoint in ``directory`` into ``model`` (a module with ``bert.*`` names, e.g. SpanBert).

    ``config`` is the model's BertConfig (default: ``model.config``); config.json must agree with it. Shapes must
    match exactly. Returns what was loaded, left fresh and ignored.
    """
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise ConfigError(f"init_from {directory}: not a directory (give a local Hugging Face model folder)")
    model_config = config or getattr(model, "config", None)
    if isinstance(model_config, BertConfig):
        check_config(read_hf_config(directory), model_config, directory, hint)
    raw, path = read_hf_state_dict(directory)
    state = hf_to_daybreak_names(raw)
    target = model.state_dict()
    report = LoadReport(source=path)
    to_load: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if name not in target:
            report.ignored.append(name)
            continue
        if tuple(value.shape) != tuple(target[name].shape):
            raise ConfigError(f"init_from {path}: {name} has shape {tuple(value.shape)}, the model's is "
                              f"{tuple(target[name].shape)}")
        to_load[name] = value.to(target[name].dtype)
        report.loaded.append(name)
    if not any(n.startswith("bert.") for n in report.loaded):
        raise ConfigError(f"init_from {path}: no tensor name matches the model's BERT (bert.embeddings..., "
                          "bert.encoder.layer.N...); is it a BERT checkpoint?")
    report.missing = sorted(set(target) - set(to_load))
    model.load_state_dict(to_load, strict=False)
    return report


def hf_config_dict(config: BertConfig) -> dict[str, Any]:
    """A ``config.json`` for ``config`` in Hugging Face's BertConfig format (for writing checkpoints)."""
    return {
        "architectures": ["BertForQuestionAnswering"], "model_type": "bert", "hidden_act": "gelu",
        "position_embedding_type": "absolute",
        "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers, "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size, "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "max_position_embeddings": config.max_position_embeddings, "type_vocab_size": config.type_vocab_size,
        "layer_norm_eps": config.layer_norm_eps, "initializer_range": config.initializer_range,
        "pad_token_id": config.pad_token_id,
    }


def save_hf_bert(model: nn.Module, directory: str | os.PathLike[str], *, safetensors: bool = True) -> Path:
    """Write ``model``'s state dict (daybreak names = Hugging Face names) and config.json into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = getattr(model, "config", None)
    if isinstance(config, BertConfig):
        (directory / CONFIG_FILE).write_text(json.dumps(hf_config_dict(config), indent=2) + "\n", encoding="utf-8")
    # Tied tensors share storage, which safetensors refuses: save independent contiguous copies.
    state = {k: v.detach().clone().contiguous().cpu() for k, v in model.state_dict().items()}
    if safetensors:
        from safetensors.torch import save_file

        path = directory / SAFETENSORS_FILE
        save_file(state, str(path), metadata={"format": "pt"})
    else:
        path = directory / PYTORCH_FILE
        torch.save(state, path)
    return path
