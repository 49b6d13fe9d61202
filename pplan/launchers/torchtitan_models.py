"""The models torchtitan ships a configuration for, and which of them (if any) is a pplan model profile.

Pure data and one lookup (no I/O). torchtitan builds a model only from a configuration it ships: in 0.3.x a
config function of a model module's registry (`--module llama3 --config llama3_70b`,
`torchtitan/models/llama3/config_registry.py`), in 0.2.x a `[model]` name and flavor
(`torchtitan/models/llama3/__init__.py`, `llama3_args`). The model is the config function's own: 0.3.0's
`Trainer.Config.model_spec` is `tyro.conf.Suppress`ed (torchtitan/trainer.py), so no command-line override changes
a layer, adds a multi-token-prediction module or picks another flavour. pplan writes settings for a plan only when
its model has exactly the shape of one of them.

Dense (both releases): the shapes are those files' of torchtitan 0.3.0 (`_8b`, `_70b`, `_405b`) and 0.2.2
(`"8B"`, `"70B"`, `"405B"`), which agree: FFN width is torchtitan's `compute_ffn_hidden_dim` of the dim,
`multiple_of` and `ffn_dim_multiplier` there, the vocabulary Llama 3's tokenizer's. GPT-3 and pplan's other GPT
shapes (learned positions, LayerNorm, GELU, biases, tied embeddings) are no torchtitan model.

Routed, 0.3.x: the config functions of torchtitan 0.3.0's
`torchtitan/models/deepseek_v3/config_registry.py` (`deepseek_v3_16b`, `deepseek_v3_671b`,
`deepseek_v3_671b_float8`), `qwen3/config_registry.py` (`qwen3_30b_a3b`) and `gpt_oss/config_registry.py`
(`gpt_oss_20b`, `gpt_oss_120b`), with the shapes of the flavours they build (`_16b`, `_671b` in
`deepseek_v3/__init__.py`, `_30b_a3b` in `qwen3/__init__.py`, `_20b`, `_120b` in `gpt_oss/__init__.py`).
DeepSeek-V3's `model_registry` builds `num_mtp_layers = 0` and its norms with `RMSNorm.Config`'s default ε 1e-5
(torchtitan/models/common/nn_modules.py); Qwen3's norms take ε 1e-6; GPT-OSS windows the even layers to 128 keys
(`sliding_window_size=128 if layer_id % 2 == 0`) and has attention sinks and biases on the QKV, output, expert and
router matrices. `qwen3/__init__.py` also has a `235B-A22B` flavour, but no config function builds it (and its
RoPE base is 5000000), so it is listed to be refused by name. torchtitan 0.3.0 has no Mixtral module.

Routed, 0.2.x: torchtitan 0.2.2's `[model] flavor` names any flavour of the module's table, and its tables have the
same shapes under the same names: `deepseekv3_args` "16B" and "671B" (torchtitan/models/deepseek_v3/__init__.py;
`DeepSeekV3ModelArgs` in model/args.py: `norm_eps` 1e-5, `rope_theta` 10000, no multi-token-prediction module;
`moe_inter_dim × num_shared_experts` shared, `n_dense_layers` dense), `qwen3_args` "30B-A3B" and "235B-A22B"
(qwen3/__init__.py; `Qwen3ModelArgs`: `norm_eps` 1e-6, every layer routed when `moe_enabled`, its `hidden_dim`
unused) and `gptoss_configs` "20b" and "120b" (gpt_oss/__init__.py; `GptOssModelArgs`: h 2880, 64 heads of 64, 8
KV heads, `sliding_window_size` 128 on even layers, sinks, biases, `gate_bias`, RoPE 150000). So one record holds
each shape for both releases; 0.2.2 builds 235B-A22B too (a profile must still match it, RoPE base included). What
differs by release is what the model can run (`cp_refusal`, `pp_refusal`) and what the output says of it (0.3.x
`config_notes`, 0.2.x `flavor_notes`). 0.2.2's other routed flavours (DeepSeek "236B", llama4's) are no pplan
profile's shape and are not listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pplan.profiles.model_spec import ModelSpec

TORCHTITAN_RELEASE = "torchtitan 0.3.0"
"""The release whose names the default `torchtitan` output uses (PyPI, github.com/pytorch/torchtitan)."""
TORCHTITAN_02_RELEASE = "torchtitan 0.2.2"
"""The 0.2.x release the `torchtitan@0.2` TOML was checked against."""

TorchtitanVersion = Literal["0.3", "0.2"]
"""The torchtitan release series pplan writes for: 0.3 (`--launcher torchtitan`) or 0.2 (`torchtitan@0.2`)."""

_RELEASE = {"0.3": TORCHTITAN_RELEASE, "0.2": TORCHTITAN_02_RELEASE}


@dataclass(frozen=True, slots=True)
class PerRelease:
    """One text about a shipped model for each release series ("" where there is nothing to say)."""

    v03: str = ""
    v02: str = ""

    def of(self, version: TorchtitanVersion) -> str:
        return self.v03 if version == "0.3" else self.v02


@dataclass(frozen=True, slots=True)
class ShippedMoe:
    """The routed MLP a torchtitan flavour builds (pplan's `MoeSpec` fields; every routed layer past the dense
    ones: torchtitan has no layer frequency)."""

    num_experts: int
    top_k: int
    expert_ffn_hidden_size: int
    shared_expert_ffn_hidden_size: int = 0
    """`moe_hidden_dim × num_shared_experts` (DeepSeek); 0: none."""
    first_dense_layers: int = 0
    """`n_dense_layers` (DeepSeek); 0: every layer routed."""
    router_bias: bool = False


@dataclass(frozen=True, slots=True)
class ShippedMla:
    """The multi-head latent attention a DeepSeek flavour builds (`make_mla_attention_config`)."""

    q_lora_rank: int | None
    """None where torchtitan's `q_lora_rank` is 0 (queries projected directly)."""
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class ShippedModel:
    """One model torchtitan ships a configuration for: where it lives and the shape it builds."""

    module: str
    """0.3.x `--module` (and 0.2.x `[model] name`)."""
    config: str
    """0.3.x `--config`: the config function in `torchtitan/models/<module>/config_registry.py` ("" where none
    builds the flavour: listed only to refuse it by name)."""
    flavor: str
    """0.2.x `[model] flavor` (and the 0.3.x model_registry flavor the config function builds)."""
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    ffn_hidden_size: int | None
    """The dense MLP's width; None where the flavour builds no dense layer (every layer routed)."""
    vocab_size: int
    rope_theta: int
    """RoPE base (`theta` / `rope_theta`); a profile that states one must agree (it changes no cost)."""
    norm_epsilon: float = 1e-5
    """RMSNorm ε (`eps` / `norm_eps`); a profile that states one must agree."""
    config_notes: tuple[str, ...] = ()
    """What the 0.3.x config function sets beyond the shape that pplan does not plan (said in the output)."""
    head_dim: int | None = None
    """Per-head width where it is not hidden / heads (Qwen3, GPT-OSS); None: hidden / heads."""
    qk_norm: bool = False
    qkv_bias: bool = False
    linear_bias: bool = False
    attention_sinks: bool = False
    sliding_window: int | None = None
    sliding_window_layers: Literal["all", "alternate"] = "all"
    moe: ShippedMoe | None = None
    mla: ShippedMla | None = None
    mtp_layers: int = 0
    fp8_config: str | None = None
    """The 0.3.x config function of the same model with Float8 converters, if the registry has one."""
    fp8_notes: tuple[str, ...] = ()
    """What that Float8 config function sets that pplan's FP8 plan does not (said in the output)."""
    cp_refusal: PerRelease = PerRelease()
    """Why each release cannot run this model with context parallelism ("" where it can)."""
    pp_refusal: PerRelease = PerRelease()
    """Why each release cannot run this model with pipeline parallelism ("" where it can)."""
    flavor_notes: tuple[str, ...] = ()
    """What the 0.2.x flavour builds beyond the shape that pplan does not plan (said in the output)."""

    def differences(self, model: ModelSpec) -> list[str]:
        """Every field in which `model` is not this shape ("field: profile's, torchtitan's"); [] when it is."""
        out: list[str] = []

        def differ(name: str, mine: object, theirs: object) -> None:
            if mine != theirs:
                out.append(f"{name} {_text(mine)} (torchtitan {_text(theirs)})")

        differ("num_layers", model.num_layers, self.num_layers)
        differ("hidden_size", model.hidden_size, self.hidden_size)
        differ("num_attention_heads", model.num_attention_heads, self.num_attention_heads)
        if self.mla is None:
            differ("kv heads", model.kv_heads, self.num_kv_heads)
            differ(
                "head width", model.head_size, self.head_dim or self.hidden_size // self.num_attention_heads
            )
        # the dense width is unused where neither side builds a dense layer
        mine_dense = model.moe is None or model.moe.first_dense_layers > 0 or model.moe.layer_frequency > 1
        if self.ffn_hidden_size is not None or mine_dense:
            differ("ffn_hidden_size", model.ffn_hidden_size, self.ffn_hidden_size)
        differ("vocab_size", model.vocab_size, self.vocab_size)
        differ("mlp", model.mlp, "swiglu")
        differ("norm", model.norm, "rmsnorm")
        differ("position_embedding", model.position_embedding, "rope")
        differ("tied_embeddings", model.tied_embeddings, False)
        differ("dropout", model.dropout, False)
        differ("qkv_bias", model.qkv_bias, self.qkv_bias)
        differ("linear_bias", model.linear_bias, self.linear_bias)
        differ("qk_norm", model.qk_norm, self.qk_norm)
        differ("attention_sinks", model.attention_sinks, self.attention_sinks)
        differ("sliding_window", model.sliding_window, self.sliding_window)
        if self.sliding_window is not None:
            differ("sliding_window_layers", model.sliding_window_layers, self.sliding_window_layers)
        if model.rope_theta is not None:
            differ("rope_theta", model.rope_theta, self.rope_theta)
        if model.norm_epsilon is not None:
            differ("norm_epsilon", model.norm_epsilon, self.norm_epsilon)
        moe, shipped_moe = model.moe, self.moe
        if (moe is None) != (shipped_moe is None):
            differ("[moe]", "present" if moe else "absent", "present" if shipped_moe else "absent")
        elif moe is not None and shipped_moe is not None:
            differ("moe.num_experts", moe.num_experts, shipped_moe.num_experts)
            differ("moe.top_k", moe.top_k, shipped_moe.top_k)
            differ(
                "moe.expert_ffn_hidden_size", moe.expert_ffn_hidden_size, shipped_moe.expert_ffn_hidden_size
            )
            differ(
                "moe.shared_expert_ffn_hidden_size",
                moe.shared_expert_ffn_hidden_size,
                shipped_moe.shared_expert_ffn_hidden_size,
            )
            differ("moe.first_dense_layers", moe.first_dense_layers, shipped_moe.first_dense_layers)
            differ("moe.layer_frequency", moe.layer_frequency, 1)
            differ("moe.router_bias", moe.router_bias, shipped_moe.router_bias)
        mla, shipped_mla = model.mla, self.mla
        if (mla is None) != (shipped_mla is None):
            differ("[mla]", "present" if mla else "absent", "present" if shipped_mla else "absent")
        elif mla is not None and shipped_mla is not None:
            for name in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                differ(f"mla.{name}", getattr(mla, name), getattr(shipped_mla, name))
        differ("mtp_layers", model.mtp_layers, self.mtp_layers)
        return out

    def matches(self, model: ModelSpec) -> bool:
        """Whether `model` is exactly this shape."""
        return not self.differences(model)

    def shape(self) -> str:
        """The shape in one phrase, for the output's header and the refusals."""
        if self.mla is not None:
            attention = "MLA"
        else:
            attention = f"{self.num_attention_heads} heads, {self.num_kv_heads} KV heads"
        text = f"{self.num_layers} layers, h {self.hidden_size}, {attention}"
        if self.ffn_hidden_size is not None:
            text += f", FFN {self.ffn_hidden_size}"
        if self.moe is not None:
            text += f", {self.moe.num_experts} experts (top-{self.moe.top_k}) of width {self.moe.expert_ffn_hidden_size}"
        return text + f", vocabulary {self.vocab_size}"


def _text(value: object) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:g}"
    return str(value)


_ROUTED_RUN = (
    "its router's scoring, grouping and load-balancing bias update (register_moe_load_balancing_hook) are the "
    "flavour's; pplan costs routing as one h × E GEMM either way"
)
_ROUTED_RUN_02 = (
    "its router's scoring, grouping and bias update are the flavour's; pplan costs routing as one h × E GEMM"
)

_NO_PIPELINE_02 = (
    "its TrainSpec has no pipelining_fn, so Trainer.__init__ raises RuntimeError with pipeline parallelism "
    "(torchtitan 0.2.2 torchtitan/models/{module}/__init__.py, torchtitan/train.py)"
)
_DEEPSEEK_CP_02 = (
    'its flavours build FlexAttention (attn_type "flex") and parallelize_deepseekv3 raises NotImplementedError '
    "for context parallelism without SDPA (torchtitan 0.2.2 torchtitan/models/deepseek_v3/infra/parallelize.py)"
)

SHIPPED_MODELS: tuple[ShippedModel, ...] = (
    ShippedModel("llama3", "llama3_8b", "8B", 32, 4096, 32, 8, 14336, 128256, 500000),
    ShippedModel("llama3", "llama3_70b", "70B", 80, 8192, 64, 8, 28672, 128256, 500000),
    ShippedModel(
        "llama3",
        "llama3_405b",
        "405B",
        126,
        16384,
        128,
        8,
        53248,
        128256,
        500000,
        config_notes=(
            "llama3_405b also converts the linear layers to Float8 (Float8LinearConverter, lm_head excepted) and "
            "compiles the model with async tensor parallelism; that is the config function's model_spec, which "
            "no command-line option changes. pplan costed BF16 matmuls with exposed tensor-parallel "
            "communication, so expect a faster step than predicted",
        ),
    ),
    ShippedModel(
        "deepseek_v3",
        "deepseek_v3_16b",
        "16B",
        27,
        2048,
        16,
        16,
        10944,
        102400,
        10000,
        mla=ShippedMla(None, 512, 128, 64, 128),
        moe=ShippedMoe(64, 6, 1408, shared_expert_ffn_hidden_size=2816, first_dense_layers=1),
        config_notes=(
            "deepseek_v3_16b builds FlexAttention and YaRN RoPE (factor 40), and compiles the loss only; "
            + _ROUTED_RUN,
        ),
        flavor_notes=(
            "deepseek_v3 flavour 16B builds FlexAttention (block-causal) and YaRN RoPE (rope_factor 40); "
            + _ROUTED_RUN_02,
        ),
        cp_refusal=PerRelease(v02=_DEEPSEEK_CP_02),
    ),
    ShippedModel(
        "deepseek_v3",
        "deepseek_v3_671b",
        "671B",
        61,
        7168,
        128,
        128,
        18432,
        129280,
        10000,
        mla=ShippedMla(1536, 512, 128, 64, 128),
        moe=ShippedMoe(256, 8, 2048, shared_expert_ffn_hidden_size=2048, first_dense_layers=3),
        config_notes=(
            "deepseek_v3_671b builds FlexAttention and YaRN RoPE (factor 40), no multi-token-prediction module, and "
            "compiles the loss only; " + _ROUTED_RUN,
        ),
        flavor_notes=(
            "deepseek_v3 flavour 671B builds FlexAttention (block-causal), YaRN RoPE (rope_factor 40) and no "
            "multi-token-prediction module; " + _ROUTED_RUN_02,
        ),
        cp_refusal=PerRelease(v02=_DEEPSEEK_CP_02),
        fp8_config="deepseek_v3_671b_float8",
        fp8_notes=(
            "deepseek_v3_671b_float8 converts every Linear but lm_head and router.gate to torchao's Float8Linear "
            "with the rowwise recipe (a scale per row, where pplan costed per-tensor scaling) and the routed "
            "experts' grouped GEMMs to Float8 (Float8GroupedExpertsConverter); torchao quantises the weights at each "
            "GEMM rather than keeping the FP8 weight copies pplan counted (memory ≤ plan), and the model is not "
            "compiled, which torchtitan warns float8 MoE needs for speed: expect another step time than predicted",
        ),
    ),
    *(
        ShippedModel(
            "qwen3",
            config,
            flavor,
            layers,
            hidden,
            heads,
            4,
            None,
            151936,
            rope,
            norm_epsilon=1e-6,
            head_dim=128,
            qk_norm=True,
            moe=ShippedMoe(128, 8, expert_ffn),
            config_notes=notes,
            flavor_notes=(f"qwen3 flavour {flavor} builds SDPA attention with QK norms; " + _ROUTED_RUN_02,),
            pp_refusal=PerRelease(v02=_NO_PIPELINE_02.format(module="qwen3")),
        )
        for config, flavor, layers, hidden, heads, expert_ffn, rope, notes in (
            (
                "qwen3_30b_a3b",
                "30B-A3B",
                48,
                2048,
                32,
                768,
                1000000,
                ("qwen3_30b_a3b builds FlexAttention with QK norms; " + _ROUTED_RUN,),
            ),
            (
                "",
                "235B-A22B",
                94,
                4096,
                64,
                1536,
                5000000,
                (),
            ),  # no config function builds it: refused by name
        )
    ),
    *(
        ShippedModel(
            "gpt_oss",
            f"gpt_oss_{size}",
            size,
            layers,
            2880,
            64,
            8,
            None,
            201088,
            150000,
            head_dim=64,
            qkv_bias=True,
            linear_bias=True,
            attention_sinks=True,
            sliding_window=128,
            sliding_window_layers="alternate",
            moe=ShippedMoe(experts, 4, 2880, router_bias=True),
            config_notes=(
                f"gpt_oss_{size} builds varlen attention, YaRN RoPE (factor 32) and clamped-SwiGLU experts; "
                + _ROUTED_RUN,
            ),
            flavor_notes=(
                f"gpt_oss flavour {size} builds FlexAttention, YaRN RoPE (rope_factor 32) and clamped-SwiGLU experts "
                "(swiglu_limit 7); " + _ROUTED_RUN_02,
            ),
            cp_refusal=PerRelease(
                "its varlen attention cannot run with context parallelism under the default spmd_backend "
                "(validate_config in torchtitan 0.3.0 torchtitan/distributed/full_dtensor.py)",
                "GptOssModelArgs.update_from_config raises NotImplementedError for context parallelism (torchtitan "
                "0.2.2 torchtitan/models/gpt_oss/model/args.py)",
            ),
            pp_refusal=PerRelease(v02=_NO_PIPELINE_02.format(module="gpt_oss")),
        )
        for size, layers, experts in (("20b", 24, 32), ("120b", 36, 128))
    ),
)


def builds(shipped: ShippedModel, version: TorchtitanVersion) -> bool:
    """Whether `version` builds `shipped`: 0.3.x from a config function, 0.2.x from any flavour of the table."""
    return bool(shipped.config) if version == "0.3" else True


def shipped_name(shipped: ShippedModel, version: TorchtitanVersion) -> str:
    """How the release names the model: its 0.3.x config function, or 0.2.x's module and flavour."""
    return shipped.config if version == "0.3" else f"{shipped.module} {shipped.flavor}"


@lru_cache(maxsize=64)
def shipped_model(model: ModelSpec, version: TorchtitanVersion = "0.3") -> ShippedModel | None:
    """The configuration of torchtitan `version` that builds exactly `model`'s shape, or None (remembered: a
    search with a launcher asks per configuration)."""
    return next((s for s in SHIPPED_MODELS if builds(s, version) and s.matches(model)), None)


def _shipped_list(routed: bool, version: TorchtitanVersion) -> str:
    return ", ".join(
        f"{shipped_name(s, version)} ({s.num_layers} layers, h {s.hidden_size})"
        for s in SHIPPED_MODELS
        if builds(s, version) and (s.moe is not None) == routed
    )


def unshipped_detail(model: ModelSpec, version: TorchtitanVersion = "0.3") -> str:
    """Why no configuration of torchtitan `version` builds `model`: the one-line detail of the refusal."""
    if model.moe is not None or model.mla is not None or model.mtp_layers:
        return _routed_detail(model, version)
    shipped = _shipped_list(False, version)
    what = "llama3 configs" if version == "0.3" else "llama3 flavours"
    if model.position_embedding != "rope" or model.mlp != "swiglu" or model.norm != "rmsnorm":
        kind = f"{model.position_embedding} positions, {model.mlp} MLP, {model.norm}"
        return f"{model.name} is not a Llama-style model ({kind}); torchtitan's dense {what} are {shipped}"
    return f"{model.name}'s shape is none of torchtitan's dense {what}: {shipped}"


def _routed_detail(model: ModelSpec, version: TorchtitanVersion) -> str:
    routed = [s for s in SHIPPED_MODELS if s.moe is not None]
    near = min(routed, key=lambda s: len(s.differences(model)))
    diff = near.differences(model)
    release = _RELEASE[version]
    if not diff:  # exactly a flavour that no config function builds (0.2.x builds every flavour)
        return (
            f"{model.name} is {release}'s {near.module} flavour {near.flavor}, but no config function "
            f"in torchtitan/models/{near.module}/config_registry.py builds it"
        )
    if len(diff) <= 3 and builds(near, version):
        why = ""
        if any(d.startswith("mtp_layers") for d in diff):
            why = (
                "; the config function builds no multi-token-prediction module and no command-line override adds "
                "one (Trainer.Config.model_spec is not a command-line field)"
                if version == "0.3"
                else f"; {release}'s {near.module} model builds no multi-token-prediction module"
            )
        what = near.config if version == "0.3" else f"{release}'s {near.module} flavour {near.flavor}"
        return f"{model.name} (routed experts) differs from {what}: {', '.join(diff)}{why}"
    if len(diff) <= 3:
        return (
            f"{model.name} (routed experts) differs from {near.module}'s {near.flavor} flavour ({', '.join(diff)}), "
            "which no config function builds anyway"
        )
    what = "configs" if version == "0.3" else "flavours"
    return (
        f"{model.name} (routed experts) is none of {release}'s routed {what}: {_shipped_list(True, version)}"
    )
