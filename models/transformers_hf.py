"""Models built by Hugging Face transformers' own modeling code from a config.json (builder "transformers").

A config dict that transformers knows (its model_type in transformers.CONFIG_MAPPING) is built with
`from_config` on the current default device: meta when counting, so no weight is allocated and nothing is
downloaded (trust_remote_code is off and an "auto_map" is dropped). Three forwards:

- model_type "whisper" (family "speech", WhisperForConditionalGeneration): the encoder over 30 s of
  log-mel frames [B, num_mel_bins, 2 x max_source_positions] and the decoder teacher-forced over seq_len
  tokens (default WHISPER_TOKENS); training: cross entropy of the logits against the next tokens.
- model_type "clip" (family "multimodal", CLIPModel): the text tower over seq_len tokens (default and most:
  its max_position_embeddings, 77) and the vision tower over image_size images (its own, 224), then the
  image-text logits; training: CLIP's symmetric contrastive loss over the batch.
- any other model_type (family "text", `parse_generic`): AutoModelForCausalLM when "architectures" names a
  *ForCausalLM or the type's causal LM class (GPT2LMHeadModel), else AutoModel (the base model), over
  input_ids [B, seq_len] (default GENERIC_TOKENS, at most
  its position table); training: cross entropy of the logits, or for a base model the mean square of its
  last hidden state (a stand-in objective that gives every parameter a gradient).

Attention is transformers' own SDPA function (transformers.integrations.sdpa_attention), registered as
ATTENTION: under that name transformers builds no attention mask and leaves causality to SDPA's is_causal
flag, because its mask preparation reads tensor values (it looks for packed sequences), which meta tensors do
not have. Local (sliding-window) masks are therefore not applied: such layers count full causal attention.
Models whose attention classes predate the attention interface fall back to "sdpa", then "eager".

Mixture-of-experts models are refused: their routing is data dependent, which meta tensors cannot run or
count; planner's own builders (models/hf.py) cover the MoE models of the zoo.
"""

from __future__ import annotations

import inspect
import json
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import library

ATTENTION = "planner_sdpa"
"""The name transformers' SDPA attention is registered under for capture (see the module docstring)."""
WHISPER_TOKENS = 224
"""Default decoder tokens of Whisper: the longest transcript openai/whisper samples for one 30 s window,
n_text_ctx // 2 = 448 // 2 (github.com/openai/whisper, whisper/decoding.py: sample_len)."""
GENERIC_TOKENS = 128
"""Default tokens of a generic transformers model (the encoder family's default of planner)."""
MAX_DEPTH = 16
"""Deepest nesting of dicts and lists accepted in a config."""
MAX_NODES = 100_000
"""Most values (dict entries and list items) accepted in a config."""
LIMITS = {"num_layers": 256, "n_layers": 256, "encoder_layers": 256, "decoder_layers": 256, "d_model": 65536,
          "dim": 65536, "embed_dim": 65536, "ffn_dim": 524288, "encoder_ffn_dim": 524288, "decoder_ffn_dim": 524288,
          "d_ff": 524288, "encoder_attention_heads": 1024, "decoder_attention_heads": 1024, "n_heads": 1024,
          "num_heads": 1024, "max_source_positions": 16777216, "max_target_positions": 16777216,
          "num_mel_bins": 1024, "projection_dim": 65536, "num_experts_per_tok": 64}
"""Largest value of size fields beside models/hf.py MAX_FIELD (which applies too), at any nesting."""
MOE_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_moe_experts")
"""Fields that make a config a mixture of experts when above 1."""
MOE_CLASS_WORDS = ("SparseMoe", "MoeBlock", "MoE", "Experts", "MoeMLP")
"""Words of the class names of transformers' expert blocks (MixtralSparseMoeBlock, DeepseekV3MoE,
Qwen2MoeExperts, GptOssExperts, ...): a built module containing one is refused."""
_SPECIFIC = {"whisper": "speech", "clip": "multimodal"}
_MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "llama4_text", "deepseek_v2", "deepseek_v3", "dbrx",
              "olmoe", "phimoe", "granitemoe", "jamba")


@dataclass(frozen=True, slots=True)
class TransformersConfig:
    """A model transformers builds; hashable (the config is kept as JSON text)."""

    model_type: str
    family: str
    """"speech" (whisper), "multimodal" (clip) or "text" (any other model_type)."""
    architecture: str
    """"whisper", "clip", "causal_lm" (AutoModelForCausalLM) or "base" (AutoModel)."""
    spec: str
    """The transformers config dict as sorted JSON (planner_* fields removed)."""
    max_tokens: int | None
    """Positions of the (decoder or text) position table; None when it has none."""
    vocab_size: int
    image_size: int | None = None
    """CLIP: image side in pixels."""
    audio_frames: int = 0
    """Whisper: log-mel frames of the 30 s window (2 x max_source_positions)."""
    mel_bins: int = 0
    repeats: bool = False

    def build(self) -> nn.Module:
        """The module built by transformers' own code on the current default device (fp32 parameters)."""
        transformers = _transformers()
        config = _config_object(transformers, self.model_type, json.loads(self.spec))
        classes = {"whisper": transformers.WhisperForConditionalGeneration, "clip": transformers.CLIPModel,
                   "causal_lm": transformers.AutoModelForCausalLM, "base": transformers.AutoModel}
        cls = classes[self.architecture]
        auto = self.architecture in ("causal_lm", "base")
        make, extra = (cls.from_config, {"trust_remote_code": False}) if auto else (cls._from_config, {})
        failure = None
        for attention in (ATTENTION, "sdpa", "eager"):
            try:
                module = make(config, attn_implementation=attention, dtype=torch.float32, **extra)
                break
            except (ValueError, TypeError, KeyError, ImportError) as exc:  # try the next attention
                failure = exc
        else:
            raise ValueError(f"model_type '{self.model_type}': transformers could not build it: {_line(failure)}")
        for name, sub in module.named_modules():
            if any(word in type(sub).__name__ for word in MOE_CLASS_WORDS):
                raise ValueError(_moe_message(self.model_type, f"module {name or '(top)'} is {type(sub).__name__}"))
        if self.architecture in ("causal_lm", "base") and module.main_input_name != "input_ids":
            raise ValueError(f"model_type '{self.model_type}': {type(module).__name__} takes "
                             f"{module.main_input_name}, not token ids; the generic path feeds input_ids only")
        return module

    def sizes(self, workload: Any) -> dict:
        """Workload sizes: seq_len (decoder or text tokens) and, for CLIP, image_size; ValueError naming the
        field when it is impossible."""
        if workload.steps is not None:
            raise ValueError(f"steps does not apply to {self.model_type} (one forward, no denoising loop)")
        if self.image_size is None and workload.image_size is not None:
            raise ValueError(f"image_size does not apply to {self.model_type}: it takes no images")
        default = {"whisper": WHISPER_TOKENS, "clip": self.max_tokens}.get(self.architecture, GENERIC_TOKENS)
        seq = workload.seq_len or (min(default, self.max_tokens) if self.max_tokens else default)
        if self.max_tokens is not None and seq > self.max_tokens:
            raise ValueError(f"seq_len {seq} is above the {self.max_tokens} positions of {self.model_type}'s "
                             "position table")
        sizes: dict = {"seq_len": seq}
        if self.image_size is not None:
            image = workload.image_size or self.image_size
            if image != self.image_size:
                raise ValueError(f"image_size must be {self.image_size} (the position table of {self.model_type}'s "
                                 f"vision tower is fixed), got {image}")
            sizes["image_size"] = image
        return sizes

    def inputs(self, module: nn.Module, workload: Any, device: str, dtype: torch.dtype):
        """(args, kwargs, labels) of one forward: token ids [B, seq_len] (whisper: decoder ids, with log-mel
        features [B, mel_bins, frames] at `dtype`; clip: with pixel values [B, 3, image, image]); labels (training
        only) are the next-token ids [B, seq_len], or for CLIP the matching pair of each row, arange(B)."""
        b, s = workload.batch, workload.seq_len
        meta = device == "meta"

        def ids(shape: tuple[int, ...]) -> torch.Tensor:
            return torch.empty(shape, dtype=torch.long, device=device) if meta else \
                torch.randint(0, self.vocab_size, shape, device=device)

        def floats(shape: tuple[int, ...]) -> torch.Tensor:
            return torch.empty(shape, dtype=dtype, device=device) if meta else \
                torch.randn(shape, dtype=dtype, device=device)

        training = workload.mode == "training"
        if self.architecture == "whisper":
            kwargs = dict(input_features=floats((b, self.mel_bins, self.audio_frames)), decoder_input_ids=ids((b, s)),
                          use_cache=False)
            return (), kwargs, ids((b, s)) if training else None
        if self.architecture == "clip":
            kwargs = dict(input_ids=ids((b, s)), pixel_values=floats((b, 3, workload.image_size, workload.image_size)))
            pairs = torch.empty((b,), dtype=torch.long, device=device) if meta else torch.arange(b, device=device)
            return (), kwargs, pairs if training else None
        kwargs = dict(input_ids=ids((b, s)))
        accepted = inspect.signature(module.forward).parameters
        if "use_cache" in accepted:
            kwargs["use_cache"] = False
        if getattr(module.config, "is_encoder_decoder", False) and "decoder_input_ids" in accepted:
            kwargs["decoder_input_ids"] = ids((b, s))
        return (), kwargs, ids((b, s)) if training and self.architecture == "causal_lm" else None

    def loss(self, output: Any, labels: torch.Tensor | None) -> torch.Tensor:
        """The training objective in fp32: token cross entropy (whisper, causal LMs), CLIP's symmetric
        contrastive loss (mean of the text->image and image->text cross entropies), or for a base model the
        mean square of its last hidden state."""
        if self.architecture == "clip":
            return (F.cross_entropy(output.logits_per_text.float(), labels)
                    + F.cross_entropy(output.logits_per_image.float(), labels)) / 2
        if self.architecture in ("whisper", "causal_lm"):
            return F.cross_entropy(output.logits.float().flatten(0, 1), labels.flatten())
        return output[0].float().pow(2).mean()


def _transformers():
    from . import tv_ops

    tv_ops.prepare()  # transformers imports torchvision when present; its compiled operators may not load
    transformers = library.require("transformers", "a transformers-built model")
    if ATTENTION not in transformers.AttentionInterface._global_mapping:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        transformers.AttentionInterface.register(ATTENTION, sdpa_attention_forward)
    return transformers


def _config_object(transformers, model_type: str, raw: dict):
    fields = {k: v for k, v in raw.items() if k not in ("model_type", "auto_map")}
    try:
        return transformers.AutoConfig.for_model(model_type, **fields)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"transformers rejected the {model_type} config: {_line(exc)}") from None


def _line(exc: BaseException | None) -> str:
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= 200 else text[:197] + "..."


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _moe_message(model_type: str, why: str) -> str:
    from .hf import MODEL_TYPES

    own = [t for t in MODEL_TYPES if t in _MOE_TYPES] or ["mixtral"]
    return (f"model_type '{model_type}' is a mixture of experts ({why}): data-dependent MoE routing cannot run on "
            f"meta tensors; planner's own builders cover the MoE model types {', '.join(own)}")


def _check(raw: Any) -> dict:
    """`raw` if it is a dict of JSON values with size fields in bounds; ValueError naming the field otherwise."""
    if not isinstance(raw, dict):
        raise ValueError(f"a config must be a JSON object, got {type(raw).__name__}")
    from .hf import MAX_FIELD

    limits = {**MAX_FIELD, **LIMITS}
    stack: list[tuple[str, Any, int]] = [("", raw, 0)]
    nodes = 0
    while stack:
        path, value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ValueError(f"the config has more than {MAX_NODES:,} values")
        if depth > MAX_DEPTH:
            raise ValueError(f"field '{path}' is nested deeper than {MAX_DEPTH} levels")
        key = path.rsplit(".", 1)[-1]
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise ValueError(f"field '{path}' has a key {_short(k)} that is not a string")
                stack.append((f"{path}.{k}" if path else k, v, depth + 1))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"field '{path}' must be a finite number, got {value}")
        elif value is not None and not isinstance(value, (bool, int, float, str)):
            raise ValueError(f"field '{path}' must be a JSON value, got {type(value).__name__}")
        if key in limits and value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limits[key]:
                raise ValueError(f"field '{path}' must be an integer from 0 to {limits[key]:,}, got {_short(value)}")
    return raw


def _int(raw: dict, key: str, default: Any = ...) -> int:
    value = raw.get(key, default)
    if value is ...:
        raise ValueError(f"field '{key}' is missing")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"field '{key}' must be a positive integer, got {_short(value)}")
    return value


def _spec(raw: dict) -> str:
    return json.dumps({k: v for k, v in raw.items() if not k.startswith("planner_")}, sort_keys=True)


def _whisper(raw: dict) -> TransformersConfig:
    # transformers' WhisperConfig defaults are whisper-tiny's; the fields that size the model must be given
    for key in ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads",
                "vocab_size"):
        _int(raw, key)
    for side in ("encoder", "decoder"):
        heads = raw[f"{side}_attention_heads"]
        if raw["d_model"] % heads:
            raise ValueError(f"field '{side}_attention_heads' ({heads}) must divide 'd_model' ({raw['d_model']})")
    return TransformersConfig(model_type="whisper", family="speech", architecture="whisper", spec=_spec(raw),
                              max_tokens=_int(raw, "max_target_positions", 448), vocab_size=raw["vocab_size"],
                              audio_frames=2 * _int(raw, "max_source_positions", 1500),
                              mel_bins=_int(raw, "num_mel_bins", 80))


def _clip(raw: dict) -> TransformersConfig:
    text, vision = raw.get("text_config") or {}, raw.get("vision_config") or {}
    if not isinstance(text, dict) or not isinstance(vision, dict):
        raise ValueError("fields 'text_config' and 'vision_config' must be JSON objects")
    image, patch = _int(vision, "image_size", 224), _int(vision, "patch_size", 32)
    if image % patch:
        raise ValueError(f"field 'vision_config.patch_size' ({patch}) must divide 'vision_config.image_size' ({image})")
    for name, tower, d, heads in (("text_config", text, 512, 8), ("vision_config", vision, 768, 12)):
        hidden, h = _int(tower, "hidden_size", d), _int(tower, "num_attention_heads", heads)
        if hidden % h:
            raise ValueError(f"field '{name}.num_attention_heads' ({h}) must divide '{name}.hidden_size' ({hidden})")
    return TransformersConfig(model_type="clip", family="multimodal", architecture="clip", spec=_spec(raw),
                              max_tokens=_int(text, "max_position_embeddings", 77),
                              vocab_size=_int(text, "vocab_size", 49408), image_size=image)


def parse_generic(raw: Any, origin: str) -> TransformersConfig:
    """The config of a model_type transformers knows but planner's own parsers do not (family "text");
    ValueError with a one-line message naming the field otherwise. Imports transformers' config tables."""
    raw = _check(raw)
    model_type = raw.get("model_type")
    try:
        from transformers.models.auto import configuration_auto, modeling_auto
    except ImportError:
        raise ValueError(f"field 'model_type' is {_short(model_type)}: planner's own parsers do not know it and "
                         f"transformers, which might, is not installed ({library.EXTRA})") from None
    known = configuration_auto.CONFIG_MAPPING_NAMES
    if not isinstance(model_type, str) or model_type not in known:
        raise ValueError(f"field 'model_type' is {_short(model_type)}; valid: planner's own model types "
                         f"(models/hf.py) or one of transformers' {len(known)} (e.g. qwen2, phi, falcon, t5)")
    if model_type in _SPECIFIC:
        return parse(raw, origin)
    for key in MOE_FIELDS:
        for where, fields in (("", raw), ("text_config.", raw.get("text_config"))):
            value = fields.get(key) if isinstance(fields, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 1:
                raise ValueError(_moe_message(model_type, f"field '{where}{key}' is {value}"))
    causal = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    texts = (causal, modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
             modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
    if not any(model_type in table for table in texts):
        raise ValueError(f"field 'model_type' is '{model_type}', which has no text model in transformers (no causal, "
                         "masked or seq2seq LM class): the generic path feeds token ids only")
    archs = raw.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ValueError(f"field 'architectures' must be a list of class names, got {_short(archs)}")
    # the causal LM class of the type as transformers names it (GPT2LMHeadModel, OPTForCausalLM, ...)
    lm = model_type in causal and any(a.endswith("ForCausalLM") or a == causal[model_type] for a in archs)
    import transformers  # AutoConfig only: no modeling code, no torchvision

    config = _config_object(transformers, model_type, json.loads(_spec(raw)))
    positions = next((getattr(config, k) for k in ("max_position_embeddings", "n_positions", "max_seq_len",
                                                   "seq_length") if isinstance(getattr(config, k, None), int)), None)
    vocab = getattr(config, "vocab_size", None)
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 1:
        raise ValueError(f"field 'vocab_size' must be a positive integer, got {_short(vocab)}")
    return TransformersConfig(model_type=model_type, family="text", architecture="causal_lm" if lm else "base",
                              spec=_spec(raw), max_tokens=positions if positions and positions > 0 else None,
                              vocab_size=vocab)


def parse(raw: dict, origin: str) -> TransformersConfig:
    """The config of a "planner_builder": "transformers" config.json: whisper, clip, or any other model_type
    transformers knows (parse_generic); ValueError naming the field when it is bad."""
    raw = _check(raw)
    model_type = raw.get("model_type")
    if model_type == "whisper":
        return _whisper(raw)
    if model_type == "clip":
        return _clip(raw)
    return parse_generic(raw, origin)
