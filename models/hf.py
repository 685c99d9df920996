"""Parse a Hugging Face style config.json into the architecture dataclasses of this package.

Supported model_type values: MODEL_TYPES (a "llama4" config is read through its text_config). Errors name
the file, the field and what would be valid; they are ValueError subclasses so the package has
no dependency on planner.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from . import library
from .decoder import DecoderConfig
from .encoder import BertConfig
from .vision import ResNetConfig, ViTConfig

MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "phi3", "gpt_oss", "llama4_text",
               "deepseek_v3", "gpt2", "gptj", "falcon", "bert", "vit", "resnet")

# Largest value accepted per field, checked before anything is built: above every published model
# (405B: 126 layers, hidden 16384; DeepSeek-V3: 256 experts; Gemma: 256k vocabulary; Llama 4: 10M
# positions) and low enough that capture on meta tensors stays within seconds.
MAX_FIELD = {"num_hidden_layers": 256, "n_layer": 256, "num_local_experts": 512, "num_experts_per_tok": 64,
             "hidden_size": 65536, "n_embd": 65536, "intermediate_size": 524288, "n_inner": 524288,
             "num_attention_heads": 1024, "n_head": 1024, "num_key_value_heads": 1024, "head_dim": 2048,
             "rotary_dim": 2048, "vocab_size": 4194304, "max_position_embeddings": 16777216,
             "n_positions": 16777216, "sliding_window": 16777216, "type_vocab_size": 1024, "image_size": 8192,
             "patch_size": 8192, "num_channels": 64, "num_labels": 1048576, "embedding_size": 65536}
MAX_OTHER = 2**24
"""Limit of an integer field not named in MAX_FIELD."""
MAX_EXPERT_LAYERS = 16384
"""num_hidden_layers x num_local_experts: each expert of each layer is captured. DeepSeek-V3 (61 x 256
= 15,616) fits; capture time grows linearly in expert blocks (64 x 512 took 34 s, so this bound keeps
the largest about 17 s on a 2-core CI machine)."""


class ConfigFieldError(ValueError):
    """A missing or bad field of a model config."""

    quiet: str = ""
    """The same message without any value read from the file (for a file a data file named: its content is not
    echoed); empty where the message echoes none."""


class _Fields:
    """Typed access to the fields of one config, with errors naming the origin and field."""

    def __init__(self, raw: dict[str, Any], origin: str):
        self.raw, self.origin = raw, origin
        self.model_type = raw.get("model_type")

    def _fail(self, key: str, why: str) -> ConfigFieldError:
        return ConfigFieldError(f"{self.origin}: field '{key}' {why} (model_type {self.model_type})")

    def int(self, key: str, default: Any = ..., minimum: int = 1) -> int | None:
        value = self.raw.get(key, default)
        if value is ...:
            raise self._fail(key, "is missing")
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._fail(key, f"must be an integer >= {minimum}, got {_short(value)}")
        limit = MAX_FIELD.get(key, MAX_OTHER)
        if value > limit:
            raise self._fail(key, f"is {value:,}, above the limit of {limit:,}")
        return value

    def float(self, key: str, default: Any = ...) -> float:
        value = self.raw.get(key, default)
        if value is ...:
            raise self._fail(key, "is missing")
        try:  # an integer beyond float range (10**400) overflows: it is not finite either
            number = math.nan if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)
        except OverflowError:
            number = math.inf
        if not 0 < number < math.inf:
            raise self._fail(key, f"must be a positive finite number, got {_short(value)}")
        return number

    def bool(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, f"must be true or false, got {value!r}")
        return value

    def int_list(self, key: str) -> tuple[int, ...]:
        value = self.raw.get(key, ...)
        if value is ...:
            raise self._fail(key, "is missing")
        if not isinstance(value, list) or not value or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            raise self._fail(key, f"must be a non-empty list of positive integers, got {_short(value)}")
        if len(value) > 16 or max(value) > 65536:
            raise self._fail(key, f"must have at most 16 entries of at most 65,536, got {_short(value)}")
        return tuple(value)

    def labels(self) -> int:
        if "num_labels" in self.raw:
            return self.int("num_labels")
        if isinstance(self.raw.get("id2label"), dict) and self.raw["id2label"]:
            if len(self.raw["id2label"]) > MAX_FIELD["num_labels"]:
                raise self._fail("id2label", f"has more than {MAX_FIELD['num_labels']:,} labels")
            return len(self.raw["id2label"])
        return 1000

    def divides(self, small_key: str, small: int, big_key: str, big: int) -> None:
        if big % small:
            raise self._fail(small_key, f"({small}) must divide '{big_key}' ({big})")


def _llama_like(f: _Fields) -> DecoderConfig:
    d, heads = f.int("hidden_size"), f.int("num_attention_heads")
    kv = f.int("num_key_value_heads", heads)
    f.divides("num_key_value_heads", kv, "num_attention_heads", heads)
    head_dim = f.raw.get("head_dim") or None
    if head_dim is None:
        f.divides("num_attention_heads", heads, "hidden_size", d)
        head_dim = d // heads
    else:
        head_dim = f.int("head_dim")
    experts = f.int("num_local_experts", 0, minimum=0) if f.model_type == "mixtral" else 0
    top_k = f.int("num_experts_per_tok", 2) if experts else 0
    if experts and top_k > experts:
        raise f._fail("num_experts_per_tok", f"({top_k}) must not exceed num_local_experts ({experts})")
    window = f.int("sliding_window", None) if f.model_type in ("mistral", "mixtral") else None
    layers = f.int("num_hidden_layers")
    if layers * experts > MAX_EXPERT_LAYERS:
        raise f._fail("num_local_experts", f"x num_hidden_layers = {layers * experts:,} expert blocks, above the "
                      f"limit of {MAX_EXPERT_LAYERS:,}")
    return DecoderConfig(
        vocab_size=f.int("vocab_size"), hidden_size=d, num_layers=f.int("num_hidden_layers"), num_heads=heads,
        num_kv_heads=kv, head_dim=head_dim, intermediate_size=f.int("intermediate_size"), mlp="gated_silu",
        norm="rms", norm_eps=f.float("rms_norm_eps", 1e-6), position="rope", rotary_dim=head_dim,
        rope_theta=f.float("rope_theta", 10000.0), max_position_embeddings=f.int("max_position_embeddings", 4096),
        qkv_bias=f.bool("attention_bias", False), out_bias=f.bool("attention_bias", False),
        mlp_bias=f.bool("mlp_bias", False), lm_head_bias=False, tie_embeddings=f.bool("tie_word_embeddings", False),
        parallel_block=False, fused_qkv=False, num_experts=experts, experts_per_token=top_k, sliding_window=window)


def _layer_types(f: _Fields, layers: int, default: tuple[str, ...]) -> tuple[str, ...]:
    """Per-layer attention kind from 'layer_types' ("sliding_attention" / "full_attention"), else `default`."""
    raw = f.raw.get("layer_types")
    if raw is None:
        return default
    valid = ("sliding_attention", "full_attention", "chunked_attention")
    if not isinstance(raw, list) or len(raw) != layers or any(t not in valid for t in raw):
        raise f._fail("layer_types", f"must list one of {', '.join(valid)} per layer ({layers})")
    return tuple("sliding" if t != "full_attention" else "" for t in raw)


def _joined(*columns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple("+".join(t for t in tags if t) for tags in zip(*columns))


def _modern(f: _Fields) -> DecoderConfig:
    """Qwen2/2.5, Qwen3, Qwen3-MoE, Gemma 2, Phi-3, gpt-oss, Llama 4 (text): Llama's layout with switches."""
    t = f.model_type
    base = _llama_like(f)
    layers = base.num_layers
    changes: dict[str, Any] = {}
    experts = 0
    if t in ("qwen3_moe", "gpt_oss", "llama4_text"):
        experts = f.int("num_experts" if t == "qwen3_moe" else "num_local_experts")
        top_k = f.int("num_experts_per_tok")
        if top_k > experts:
            raise f._fail("num_experts_per_tok", f"({top_k}) must not exceed the {experts} experts")
        if layers * experts > MAX_EXPERT_LAYERS:
            raise f._fail("num_hidden_layers", f"x experts = {layers * experts:,} expert blocks, above the limit of "
                          f"{MAX_EXPERT_LAYERS:,}")
        changes.update(num_experts=experts, experts_per_token=top_k)
    moe = [bool(experts)] * layers
    window = None
    sliding = ("",) * layers
    if t == "qwen2":  # q, k, v projections carry a bias; o_proj does not
        changes.update(qkv_bias=True, out_bias=False)
        if f.bool("use_sliding_window", False):
            window = f.int("sliding_window")
            first_full = f.int("max_window_layers", layers, minimum=0)
            sliding = tuple("sliding" if i >= first_full else "" for i in range(layers))
    elif t in ("qwen3", "qwen3_moe"):
        changes.update(qk_norm="rms")
        if t == "qwen3_moe":
            step = f.int("decoder_sparse_step", 1)
            dense = f.raw.get("mlp_only_layers") or []
            if not isinstance(dense, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in dense):
                raise f._fail("mlp_only_layers", "must be a list of layer indices")
            moe = [i not in dense and (i + 1) % step == 0 for i in range(layers)]
            changes.update(moe_intermediate_size=f.int("moe_intermediate_size"))
    elif t == "gemma2":
        window = f.int("sliding_window", 4096)
        sliding = _layer_types(f, layers, tuple("sliding" if i % 2 == 0 else "" for i in range(layers)))
        scalar = f.int("query_pre_attn_scalar", base.head_dim)
        if scalar != base.head_dim:
            raise f._fail("query_pre_attn_scalar", f"({scalar}) other than head_dim ({base.head_dim}) is not modelled")
        changes.update(mlp="gated_gelu", sandwich_norm=True, embed_scale=True,
                       final_softcap=f.float("final_logit_softcapping", 30.0) if f.raw.get("final_logit_softcapping")
                       is not None else 0.0, tie_embeddings=f.bool("tie_word_embeddings", True))
    elif t == "phi3":  # one fused q|k|v projection (and gate|up, which counts the same parameters)
        changes.update(fused_qkv=True)
        if f.raw.get("sliding_window") is not None:
            window = f.int("sliding_window")
            sliding = ("sliding",) * layers
    elif t == "gpt_oss":
        window = f.int("sliding_window", 128)
        sliding = _layer_types(f, layers, tuple("sliding" if i % 2 == 0 else "" for i in range(layers)))
        changes.update(qkv_bias=True, out_bias=True, router_bias=True, expert_bias=True, attn_sinks=True,
                       swiglu_limit=f.float("swiglu_limit", 7.0), moe_intermediate_size=base.intermediate_size)
    elif t == "llama4_text":
        step = f.int("interleave_moe_layer_step", 1)
        moe = [(i + 1) % step == 0 for i in range(layers)]
        interval = f.int("no_rope_layer_interval", 4)
        nope = tuple("nope" if (i + 1) % interval == 0 else "" for i in range(layers))
        chunk = f.int("attention_chunk_size", None)
        if chunk is not None:  # rotary layers attend within chunks of this size: a window for the KV cache
            window = chunk
            sliding = tuple("sliding" if not n else "" for n in nope)
        sliding = _joined(sliding, nope)
        width = f.int("intermediate_size")
        changes.update(intermediate_size=f.int("intermediate_size_mlp", width), moe_intermediate_size=width,
                       shared_intermediate_size=width, router="sigmoid",
                       qk_norm="l2" if f.bool("use_qk_norm", True) else "none")
    kinds = _joined(tuple("moe" if m else "" for m in moe), sliding)
    changes.update(sliding_window=window, kinds=kinds if len(set(kinds)) > 1 or any(kinds) else ())
    return replace(base, **changes)


def _deepseek(f: _Fields) -> DecoderConfig:
    """DeepSeek-V3 (and V2's layout): multi-head latent attention, a dense prefix, then MoE layers with
    shared experts; the multi-token-prediction module (num_nextn_predict_layers) is not part of the
    inference model (Hugging Face's DeepseekV3ForCausalLM does not build it either)."""
    d, heads, layers = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    experts, top_k = f.int("n_routed_experts"), f.int("num_experts_per_tok")
    if top_k > experts:
        raise f._fail("num_experts_per_tok", f"({top_k}) must not exceed n_routed_experts ({experts})")
    if layers * experts > MAX_EXPERT_LAYERS:
        raise f._fail("n_routed_experts", f"x num_hidden_layers = {layers * experts:,} expert blocks, above the "
                      f"limit of {MAX_EXPERT_LAYERS:,}")
    q_rank = f.int("q_lora_rank", 0, minimum=0) or 0
    c, n, r, v = (f.int("kv_lora_rank"), f.int("qk_nope_head_dim"), f.int("qk_rope_head_dim"), f.int("v_head_dim"))
    dense, freq = f.int("first_k_dense_replace", 0, minimum=0), f.int("moe_layer_freq", 1)
    width = f.int("moe_intermediate_size")
    kinds = tuple("moe" if i >= dense and i % freq == 0 else "" for i in range(layers))
    return DecoderConfig(
        vocab_size=f.int("vocab_size"), hidden_size=d, num_layers=layers, num_heads=heads, num_kv_heads=heads,
        head_dim=n + r, intermediate_size=f.int("intermediate_size"), mlp="gated_silu", norm="rms",
        norm_eps=f.float("rms_norm_eps", 1e-6), position="rope", rotary_dim=r,
        rope_theta=f.float("rope_theta", 10000.0), max_position_embeddings=f.int("max_position_embeddings", 4096),
        qkv_bias=f.bool("attention_bias", False), out_bias=f.bool("attention_bias", False), mlp_bias=False,
        lm_head_bias=False, tie_embeddings=f.bool("tie_word_embeddings", False), parallel_block=False,
        fused_qkv=False, num_experts=experts, experts_per_token=top_k, moe_intermediate_size=width,
        shared_intermediate_size=width * f.int("n_shared_experts", 0, minimum=0),
        router="sigmoid" if f.raw.get("scoring_func", "sigmoid") == "sigmoid" else "softmax",
        kinds=kinds, mla=(q_rank, c, n, r, v))


def _gpt2(f: _Fields) -> DecoderConfig:
    d, heads = f.int("n_embd"), f.int("n_head")
    f.divides("n_head", heads, "n_embd", d)
    return DecoderConfig(
        vocab_size=f.int("vocab_size"), hidden_size=d, num_layers=f.int("n_layer"), num_heads=heads,
        num_kv_heads=heads, head_dim=d // heads, intermediate_size=f.int("n_inner", None) or 4 * d, mlp="gelu",
        norm="layer", norm_eps=f.float("layer_norm_epsilon", 1e-5), position="learned", rotary_dim=0,
        rope_theta=1.0, max_position_embeddings=f.int("n_positions", 1024), qkv_bias=True, out_bias=True,
        mlp_bias=True, lm_head_bias=False, tie_embeddings=f.bool("tie_word_embeddings", True),
        parallel_block=False, fused_qkv=True)


def _gptj(f: _Fields) -> DecoderConfig:
    d, heads = f.int("n_embd"), f.int("n_head")
    f.divides("n_head", heads, "n_embd", d)
    rotary = f.int("rotary_dim", d // heads)
    if rotary > d // heads or rotary % 2:
        raise f._fail("rotary_dim", f"must be even and at most the head dim {d // heads}, got {rotary}")
    return DecoderConfig(
        vocab_size=f.int("vocab_size"), hidden_size=d, num_layers=f.int("n_layer"), num_heads=heads,
        num_kv_heads=heads, head_dim=d // heads, intermediate_size=f.int("n_inner", None) or 4 * d, mlp="gelu",
        norm="layer", norm_eps=f.float("layer_norm_epsilon", 1e-5), position="rope", rotary_dim=rotary,
        rope_theta=10000.0, max_position_embeddings=f.int("n_positions", 2048), qkv_bias=False, out_bias=False,
        mlp_bias=True, lm_head_bias=True, tie_embeddings=f.bool("tie_word_embeddings", False),
        parallel_block=True, fused_qkv=False)


def _falcon(f: _Fields) -> DecoderConfig:
    """Falcon (7B's layout, FalconForCausalLM): one fused query_key_value projection with one shared K/V head
    (multi_query) or as many as the queries, rotary positions on the whole head, a 4 x d GELU MLP, LayerNorm,
    attention and MLP in parallel off one norm (parallel_attn; else one after the other), the head tied to
    the embeddings. Falcon-40B/180B's layout (new_decoder_architecture: grouped K/V heads, two norms per
    parallel block) and ALiBi positions (Falcon-RW) are refused rather than counted as another model."""
    for key, what in (("new_decoder_architecture", "Falcon-40B/180B's layout: two norms per parallel block"),
                      ("alibi", "ALiBi positions")):
        if f.bool(key, False):
            raise f._fail(key, f"is true ({what}), which is not modelled; valid: false (Falcon-7B's layout)")
    d, heads = f.int("hidden_size"), f.int("num_attention_heads")
    f.divides("num_attention_heads", heads, "hidden_size", d)
    bias, parallel = f.bool("bias", False), f.bool("parallel_attn", True)
    return DecoderConfig(
        vocab_size=f.int("vocab_size"), hidden_size=d, num_layers=f.int("num_hidden_layers"), num_heads=heads,
        num_kv_heads=1 if f.bool("multi_query", True) else heads, head_dim=d // heads,
        intermediate_size=f.int("ffn_hidden_size", None) or 4 * d, mlp="gelu", norm="layer",
        norm_eps=f.float("layer_norm_epsilon", 1e-5), position="rope", rotary_dim=d // heads,
        rope_theta=f.float("rope_theta", 10000.0), max_position_embeddings=f.int("max_position_embeddings", 2048),
        qkv_bias=bias, out_bias=bias, mlp_bias=bias, lm_head_bias=False,
        tie_embeddings=f.bool("tie_word_embeddings", True), parallel_block=parallel, fused_qkv=True)


def _bert(f: _Fields) -> BertConfig:
    d, heads = f.int("hidden_size"), f.int("num_attention_heads")
    f.divides("num_attention_heads", heads, "hidden_size", d)
    return BertConfig(vocab_size=f.int("vocab_size"), hidden_size=d, num_layers=f.int("num_hidden_layers"),
                      num_heads=heads, intermediate_size=f.int("intermediate_size"),
                      max_position_embeddings=f.int("max_position_embeddings", 512),
                      type_vocab_size=f.int("type_vocab_size", 2), norm_eps=f.float("layer_norm_eps", 1e-12))


def _vit(f: _Fields) -> ViTConfig:
    d, heads = f.int("hidden_size"), f.int("num_attention_heads")
    f.divides("num_attention_heads", heads, "hidden_size", d)
    image, patch = f.int("image_size", 224), f.int("patch_size", 16)
    f.divides("patch_size", patch, "image_size", image)
    return ViTConfig(hidden_size=d, num_layers=f.int("num_hidden_layers"), num_heads=heads,
                     intermediate_size=f.int("intermediate_size"), patch_size=patch, image_size=image,
                     num_channels=f.int("num_channels", 3), num_labels=f.labels(),
                     norm_eps=f.float("layer_norm_eps", 1e-12))


def _resnet(f: _Fields) -> ResNetConfig:
    if f.raw.get("layer_type", "bottleneck") != "bottleneck":
        raise f._fail("layer_type", f"must be 'bottleneck', got {f.raw.get('layer_type')!r}")
    depths, sizes = f.int_list("depths"), f.int_list("hidden_sizes")
    if len(depths) != len(sizes):
        raise f._fail("hidden_sizes", f"must have one entry per stage in 'depths' ({len(depths)})")
    if any(size % 4 for size in sizes):
        # a bottleneck block's inner width is its output width / 4 (the expansion of ResNet-50)
        raise f._fail("hidden_sizes", f"must be multiples of 4 (bottleneck expansion), got {list(sizes)}")
    if sum(depths) > 1024:
        raise f._fail("depths", f"sum to {sum(depths):,} blocks, above the limit of 1,024")
    return ResNetConfig(depths=depths, hidden_sizes=sizes, embedding_size=f.int("embedding_size", 64),
                        num_labels=f.labels(), image_size=f.int("image_size", 224))


_PARSERS = {"llama": ("decoder", _llama_like), "mistral": ("decoder", _llama_like),
            "qwen2": ("decoder", _modern), "qwen3": ("decoder", _modern), "qwen3_moe": ("decoder", _modern),
            "gemma2": ("decoder", _modern), "phi3": ("decoder", _modern), "gpt_oss": ("decoder", _modern),
            "llama4_text": ("decoder", _modern), "deepseek_v3": ("decoder", _deepseek),
            "mixtral": ("decoder", _llama_like), "gpt2": ("decoder", _gpt2), "gptj": ("decoder", _gptj),
            "falcon": ("decoder", _falcon),
            "bert": ("encoder", _bert), "vit": ("vision", _vit), "resnet": ("vision", _resnet)}


_LLAMA = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
_GPT = ("vocab_size", "n_embd", "n_layer", "n_head")
_REQUIRED = {"llama": _LLAMA, "mistral": _LLAMA, "qwen2": _LLAMA, "qwen3": _LLAMA,
             "qwen3_moe": _LLAMA + ("num_experts", "moe_intermediate_size"), "gemma2": _LLAMA, "phi3": _LLAMA,
             "gpt_oss": _LLAMA + ("num_local_experts",), "llama4_text": _LLAMA + ("num_local_experts",),
             "deepseek_v3": _LLAMA + ("n_routed_experts", "moe_intermediate_size", "kv_lora_rank",
                                      "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"), "mixtral": _LLAMA + ("num_local_experts",), "gpt2": _GPT,
             "gptj": _GPT, "falcon": ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"),
             "bert": ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                    "intermediate_size"),
             "vit": ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"),
             "resnet": ("depths", "hidden_sizes")}


def parse(raw: Any, origin: str) -> tuple[str, DecoderConfig | BertConfig | ResNetConfig | ViTConfig]:
    """Return (family, config) from a parsed config.json; family is "decoder", "encoder" or "vision"."""
    if not isinstance(raw, dict):
        raise ConfigFieldError(f"{origin}: a config must be a JSON object, got {type(raw).__name__}")
    if "planner_builder" in raw:  # built by a library's own modeling code (models/library.py)
        config = library.parse(raw, origin, ConfigFieldError)
        return config.family, config
    if raw.get("model_type") == "llama4" and isinstance(raw.get("text_config"), dict):
        raw = dict(raw["text_config"], model_type="llama4_text")  # the language model of Llama 4
    model_type = raw.get("model_type")
    if isinstance(model_type, str) and model_type not in _PARSERS and _transformers_knows(model_type):
        # any other architecture transformers knows: its own modeling code (models/transformers_hf.py)
        config = library.parse({**raw, "planner_builder": "transformers"}, origin, ConfigFieldError)
        return config.family, config
    if not isinstance(model_type, str) or model_type not in _PARSERS:
        exc = ConfigFieldError(f"{origin}: field 'model_type' is {_short(model_type)}; valid: {', '.join(MODEL_TYPES)}")
        exc.quiet = f"{origin}: field 'model_type' is not one planner reads; valid: {', '.join(MODEL_TYPES)}"
        raise exc
    missing = [key for key in _REQUIRED[model_type] if key not in raw]
    if missing:
        fields = ", ".join(f"'{key}'" for key in missing)
        raise ConfigFieldError(f"{origin}: missing field{'s' if len(missing) > 1 else ''} {fields} "
                               f"(model_type {model_type} needs {', '.join(_REQUIRED[model_type])})")
    family, parser = _PARSERS[model_type]
    return family, parser(_Fields(raw, origin))


def _transformers_knows(model_type: str) -> bool:
    """True when the installed transformers has a config class for `model_type` (False without transformers)."""
    if len(model_type) > 100 or not model_type.replace("-", "_").isidentifier():
        return False
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return False
    return model_type in CONFIG_MAPPING


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
