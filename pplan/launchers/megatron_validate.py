"""Megatron-LM's own checks on an argument list, so pplan can prove its `--format megatron` output passes them.

The module owns two things:
- `megatron_parser`: an `argparse` parser built from the option table of Megatron-LM's parser
  (`megatron_lm_options.json` beside this module: every option `parse_args` builds in
  `megatron/training/arguments.py` at tag core_v0.16.1, with its flags, dest, action, type, default, choices and
  nargs). Like Megatron's (`argparse.ArgumentParser(allow_abbrev=False)`, `parse_args` without
  `ignore_unknown_args`), it refuses an unknown flag, a value outside the choices or of the wrong type.
- `validate_megatron`: the rules of `validate_args` (and of the megatron-core code they hand the arguments to)
  that concern what pplan emits, each a `MegatronRule` with its source (repository, tag, file, function) and the
  source's assertion message. It first derives what `validate_args` derives (d, m, the virtual pipeline size,
  the micro-batch group size, sequence parallelism off at t = 1, the FFN and head widths) and returns the
  parsed namespace with those values, so tests compare Megatron's reading of the flags with the plan.

Sources. megatron-core rules (`megatron/core/...` at 0.16.1, the PyPI wheel `megatron-core==0.16.1`) were
checked against the released files. `megatron/training/arguments.py` is not on PyPI (neither the megatron-core
wheel nor its sdist ships `megatron/training`); its rules below restate the checks of `validate_args` /
`core_transformer_config_from_args` at github.com/NVIDIA/Megatron-LM tag core_v0.16.1. Unlike the option table
(extracted from that file) and the megatron-core rules, these were written without the file at hand: the
conditions are the upstream ones as known, the message texts may differ in wording from the source and should
be diffed against it where it can be fetched.

Pure apart from reading the bundled table once (cached).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

OPTIONS_FILE = "megatron_lm_options.json"

MLM = "NVIDIA/Megatron-LM core_v0.16.1, megatron/training/arguments.py"
CORE = "NVIDIA/Megatron-LM core_v0.16.1 (megatron-core 0.16.1), megatron/core"


class MegatronArgumentError(ValueError):
    """What Megatron's argparse would print before exiting with status 2 (unknown flag, bad choice, bad type)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print and exit(2)
        raise MegatronArgumentError(message)


@cache
def option_table() -> dict[str, Any]:
    """The bundled option table: {"source", "count", "options": [{flags, dest, action, type, default, choices,
    nargs}, ...]}."""
    text = resources.files("pplan.launchers").joinpath(OPTIONS_FILE).read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def _type(name: str | None) -> Callable[[str], Any] | None:
    # Megatron's custom converters (enum handlers, tuple/frequency parsers) take strings; pplan emits none of them.
    return {"int": int, "float": float, "str": str}.get(name or "", str if name else None)


@cache
def megatron_parser() -> argparse.ArgumentParser:
    """An argparse parser with every option of Megatron-LM's (core_v0.16.1), refusing as Megatron's does."""
    parser = _Parser(prog="pretrain_gpt.py", allow_abbrev=False, add_help=False)
    for opt in option_table()["options"]:
        flags: list[str] = opt["flags"]
        action = opt["action"]
        kw: dict[str, Any] = {"dest": opt["dest"], "default": opt["default"]}
        if action == "_StoreTrueAction":
            kw["action"] = "store_true"
        elif action == "_StoreFalseAction":
            kw["action"] = "store_false"
        elif action == "BooleanOptionalAction":
            kw["action"] = argparse.BooleanOptionalAction
            flags = [f for f in flags if not f.startswith("--no-")]
        else:
            kw["type"] = _type(opt["type"])
            if opt["choices"] is not None:
                kw["choices"] = opt["choices"]
            if opt["nargs"] is not None:
                kw["nargs"] = opt["nargs"]
        parser.add_argument(*flags, **kw)
    return parser


def parse_megatron_args(args: Sequence[str]) -> argparse.Namespace:
    """The namespace Megatron's parser gives `args`; a MegatronArgumentError where it would exit instead."""
    return megatron_parser().parse_args(list(args))


@dataclass(frozen=True)
class MegatronContext:
    """What the checks read besides the flags: the launch's world size and environment, and the GPU generation."""

    world_size: int
    env: Mapping[str, str]
    device_arch: int = 9
    """CUDA compute capability major version (9 = Hopper; Megatron's CUDA_DEVICE_MAX_CONNECTIONS rule is < 10)."""


@dataclass(frozen=True)
class MegatronRule:
    """One check of Megatron's: `holds(ns, ctx)` is False exactly where the source asserts or raises."""

    name: str
    source: str
    """Repository, tag, file and function."""
    message: str
    """The source's assertion or exception message."""
    holds: Callable[[argparse.Namespace, MegatronContext], bool]


@dataclass(frozen=True)
class MegatronCheck:
    namespace: argparse.Namespace
    """The parsed flags with what `validate_args` derives (see `_derive`)."""
    failures: tuple[str, ...]
    """`name: message (source)` of every rule that fails; empty when Megatron accepts the arguments."""


# ------------------------------------------------------------------------------------------- derivations


_LAYOUT_PATTERNS = (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)")


def layout_stages(layout: str) -> list[str]:
    """A `--pipeline-model-parallel-layout` string as one string of layer characters per virtual stage, model
    order (megatron-core `PipelineParallelLayerLayout.parse_str_to_list`: commas dropped, `(..)*n` and `x*n`
    unrolled, `|` separates stages)."""
    text = layout.replace(",", "")
    for pattern in _LAYOUT_PATTERNS:
        text = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), text)
    return text.split("|")


def _vp_size(ns: argparse.Namespace) -> int | None:
    if ns.pipeline_model_parallel_layout is not None:
        stages = len(layout_stages(ns.pipeline_model_parallel_layout))
        vp = stages // ns.pipeline_model_parallel_size
        return vp if vp > 1 else None
    if ns.num_virtual_stages_per_pipeline_rank is not None:
        return int(ns.num_virtual_stages_per_pipeline_rank)
    if ns.num_layers_per_virtual_pipeline_stage is not None:
        per_rank = ns.num_layers // ns.pipeline_model_parallel_size
        return int(per_rank // ns.num_layers_per_virtual_pipeline_stage)
    return None


def layers_per_virtual_stage(ns: argparse.Namespace) -> list[int]:
    """Decoder layers of each virtual stage in model order (index = vp_rank · p + pp_rank), as Megatron builds
    them (megatron-core `transformer_block.get_num_layers_to_build`, or the layout string); [] if undefined."""
    p = ns.pipeline_model_parallel_size
    if ns.pipeline_model_parallel_layout is not None:
        return [stage.count("t") for stage in layout_stages(ns.pipeline_model_parallel_layout)]
    v = ns.virtual_pipeline_model_parallel_size or 1
    first, last = ns.decoder_first_pipeline_num_layers, ns.decoder_last_pipeline_num_layers
    rest, ranks_left = ns.num_layers, p
    for edge in (first, last):
        if edge is not None:
            rest -= edge
            ranks_left -= 1
    if ranks_left < 0 or (ranks_left and rest % ranks_left) or (not ranks_left and rest):
        return []
    per_rank = [rest // ranks_left if ranks_left else 0] * p
    if first is not None:
        per_rank[0] = first
    if last is not None:
        per_rank[-1] = last
    if any(n % v for n in per_rank):
        return []
    return [per_rank[r] // v for _ in range(v) for r in range(p)]


def _derive(ns: argparse.Namespace, ctx: MegatronContext) -> argparse.Namespace:
    """What validate_args derives before its checks (megatron/training/arguments.py, validate_args)."""
    t, p, cp = ns.tensor_model_parallel_size, ns.pipeline_model_parallel_size, ns.context_parallel_size
    ns.world_size = ctx.world_size
    ns.data_parallel_size = ctx.world_size // (t * p * cp)
    d = max(ns.data_parallel_size, 1)
    mbs = ns.micro_batch_size
    ns.global_batch_size = ns.global_batch_size if ns.global_batch_size is not None else mbs * d
    ns.num_micro_batches = ns.global_batch_size // (mbs * d)
    if t == 1:  # "Disabling sequence parallelism because tensor model parallelism is disabled"
        ns.sequence_parallel = False
    ns.virtual_pipeline_model_parallel_size = _vp_size(ns) if p > 1 else None
    if ns.microbatch_group_size_per_vp_stage is None:
        ns.microbatch_group_size_per_vp_stage = p
    if ns.ffn_hidden_size is None and ns.hidden_size is not None:
        ns.ffn_hidden_size = int((4 * ns.hidden_size * 2 / 3) / 64) * 64 if ns.swiglu else 4 * ns.hidden_size
    if ns.kv_channels is None and ns.hidden_size and ns.num_attention_heads:
        ns.kv_channels = ns.hidden_size // ns.num_attention_heads
    if not ns.add_bias_linear:  # "Disable bias gelu fusion if we are disabling bias altogether"
        ns.bias_gelu_fusion = False
    ns.use_rotary_position_embeddings = ns.position_embedding_type == "rope"
    return ns


# ------------------------------------------------------------------------------------------------- rules


def _interleaved(ns: argparse.Namespace) -> bool:
    return bool(ns.virtual_pipeline_model_parallel_size) and ns.pipeline_model_parallel_size > 1


def _uneven(ns: argparse.Namespace) -> bool:
    return ns.decoder_first_pipeline_num_layers is not None or ns.decoder_last_pipeline_num_layers is not None


def _middle_split(ns: argparse.Namespace) -> bool:
    rest, ranks = ns.num_layers, ns.pipeline_model_parallel_size
    for edge in (ns.decoder_first_pipeline_num_layers, ns.decoder_last_pipeline_num_layers):
        if edge is not None:
            rest, ranks = rest - edge, ranks - 1
    return bool(rest) == bool(ranks) and (not ranks or rest % ranks == 0)


def _edges_divisible_by_v(ns: argparse.Namespace) -> bool:
    v = ns.virtual_pipeline_model_parallel_size
    edges = (ns.decoder_first_pipeline_num_layers, ns.decoder_last_pipeline_num_layers)
    return v is None or all(e is None or e % v == 0 for e in edges)


def _even_split(ns: argparse.Namespace) -> bool:
    if _uneven(ns) or ns.pipeline_model_parallel_layout is not None:
        return True
    extra = int(ns.account_for_embedding_in_pipeline_split) + int(ns.account_for_loss_in_pipeline_split)
    return bool((ns.num_layers + extra) % ns.pipeline_model_parallel_size == 0)


def _per_rank_by_v(ns: argparse.Namespace) -> bool:
    if not _interleaved(ns) or ns.pipeline_model_parallel_layout is not None or not _even_split(ns):
        return True
    if not _middle_split(ns):
        return True  # reported by the uneven-split rule
    return bool(layers_per_virtual_stage(ns))


def _layout_ok(ns: argparse.Namespace) -> bool:
    if ns.pipeline_model_parallel_layout is None:
        return True
    stages = layout_stages(ns.pipeline_model_parallel_layout)
    flat = "".join(stages)
    return (
        len(stages) % ns.pipeline_model_parallel_size == 0
        and set(flat) <= set("EtLm")
        and flat.count("t") == ns.num_layers
        and flat.count("L") == 1
        and flat.count("E") == 1
    )


def _group_rule(ns: argparse.Namespace) -> bool:
    if not _interleaved(ns):
        return True
    g, m, p = ns.microbatch_group_size_per_vp_stage, ns.num_micro_batches, ns.pipeline_model_parallel_size
    return p <= g <= m and not (0 < m % g < p)


def _fusion_ok(ns: argparse.Namespace) -> bool:
    # core_transformer_config_from_args: bias_activation_fusion = bias_swiglu_fusion with --swiglu (SiLU),
    # bias_gelu_fusion otherwise (GELU, or squared ReLU with --squared-relu); TransformerConfig then refuses
    # fusion for an activation other than GELU/SiLU, and for a GELU MLP without linear biases.
    if ns.swiglu:
        return True
    if not ns.bias_gelu_fusion:
        return True
    return not ns.squared_relu and ns.add_bias_linear


def _pre_blackwell_tp_cp(ns: argparse.Namespace, ctx: MegatronContext) -> bool:
    return (ns.tensor_model_parallel_size > 1 or ns.context_parallel_size > 1) and ctx.device_arch < 10


def _fsdp(ns: argparse.Namespace) -> bool:
    return bool(ns.use_megatron_fsdp)


RULES: tuple[MegatronRule, ...] = (
    MegatronRule(
        "required model sizes",
        f"{MLM}, validate_args (required_args, _check_arg_is_not_none)",
        "{req_arg} argument is None",
        lambda ns, _: (
            None not in (ns.num_layers, ns.hidden_size, ns.num_attention_heads, ns.max_position_embeddings)
        ),
    ),
    MegatronRule(
        "world size",
        f"{MLM}, validate_args",
        "world size ({world_size}) is not divisible by tensor model parallel size ({t}) times pipeline model "
        "parallel size ({p}) times context parallel size ({cp})",
        lambda ns, ctx: (
            ctx.world_size
            % (ns.tensor_model_parallel_size * ns.pipeline_model_parallel_size * ns.context_parallel_size)
            == 0
        ),
    ),
    MegatronRule(
        "global batch",
        f"{CORE}/num_microbatches_calculator.py, ConstantNumMicroBatchesCalculator.__init__",
        "global batch size ({}) is not divisible by micro batch size ({}) times data parallel size ({})",
        lambda ns, _: (
            ns.data_parallel_size > 0
            and ns.global_batch_size % (ns.micro_batch_size * ns.data_parallel_size) == 0
            and ns.num_micro_batches >= 1
        ),
    ),
    MegatronRule(
        "position table covers the sequence",
        f"{MLM}, validate_args",
        "max_position_embeddings ({max_position_embeddings}) must be greater than or equal to seq_length "
        "({seq_length})",
        lambda ns, _: (
            ns.seq_length is None
            or ns.max_position_embeddings is None
            or ns.max_position_embeddings >= ns.seq_length
        ),
    ),
    MegatronRule(
        "context parallel sequence",
        f"{MLM}, validate_args",
        "seq-length should be a multiple of 2 * context-parallel-size if context-parallel-size > 1.",
        lambda ns, _: ns.context_parallel_size == 1 or ns.seq_length % (2 * ns.context_parallel_size) == 0,
    ),
    MegatronRule(
        "head width",
        f"{MLM}, validate_args (kv_channels unset)",
        "assert args.hidden_size % args.num_attention_heads == 0",
        lambda ns, _: ns.kv_channels is not None and ns.kv_channels > 0,
    ),
    MegatronRule(
        "heads split by t",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__",
        "num_attention_heads ({}) must be a multiple of tensor_model_parallel_size ({}).",
        lambda ns, _: ns.num_attention_heads % ns.tensor_model_parallel_size == 0,
    ),
    MegatronRule(
        "query groups and t",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__",
        "num_query_groups ({}) must be a multiple or divisor of tensor_model_parallel_size ({}).",
        lambda ns, _: (
            not ns.group_query_attention
            or ns.num_query_groups % ns.tensor_model_parallel_size == 0
            or ns.tensor_model_parallel_size % ns.num_query_groups == 0
        ),
    ),
    MegatronRule(
        "query groups divide heads",
        f"{CORE}/transformer/attention.py, Attention.__init__ (divide → ensure_divisibility)",
        "{numerator} is not divisible by {denominator}",
        lambda ns, _: not ns.group_query_attention or ns.num_attention_heads % ns.num_query_groups == 0,
    ),
    MegatronRule(
        "one MLP activation",
        f"{MLM}, core_transformer_config_from_args",
        "assert not args.swiglu  (with --squared-relu)",
        lambda ns, _: not (ns.swiglu and ns.squared_relu),
    ),
    MegatronRule(
        "bias-activation fusion",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__",
        "When bias_activation_fusion is True, activation function should be either gelu, swiglu, or quick_geglu"
        " / ... gated_linear_unit is False and activation function is gelu, add_bias_linear must also be True.",
        lambda ns, _: _fusion_ok(ns),
    ),
    MegatronRule(
        "one precision",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__",
        "Only one of self.fp16: {} and self.bf16 {} should be True.",
        lambda ns, _: not (ns.fp16 and ns.bf16),
    ),
    MegatronRule(
        "even pipeline split",
        f"{CORE}/transformer/transformer_block.py, get_num_layers_to_build",
        "num_layers should be divisible by pipeline_model_parallel_size",
        lambda ns, _: _even_split(ns),
    ),
    MegatronRule(
        "uneven pipeline split",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__ (uneven PP)",
        "number of layers at middle stage: {} must be divisible by the middle pipeline model parallel size {} "
        "/ Mismatch: {} middle layers remaining but {} middle PP stages available.",
        lambda ns, _: not _uneven(ns) or _middle_split(ns),
    ),
    MegatronRule(
        "uneven stages and virtual stages",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__ (uneven PP)",
        "number of layers at first stage: {} must be divisible by virtual pipeline parallel degree {}",
        lambda ns, _: not _uneven(ns) or _edges_divisible_by_v(ns),
    ),
    MegatronRule(
        "layers per rank and virtual stages",
        f"{CORE}/transformer/transformer_block.py, get_num_layers_to_build",
        "num_layers_per_pipeline_rank {} should be divisible by vp_size {}",
        lambda ns, _: _per_rank_by_v(ns),
    ),
    MegatronRule(
        "one interleaving flag",
        f"{MLM}, validate_args",
        "num-layers-per-virtual-pipeline-stage and num-virtual-stages-per-pipeline-rank cannot be set at the "
        "same time",
        lambda ns, _: (
            ns.num_layers_per_virtual_pipeline_stage is None
            or ns.num_virtual_stages_per_pipeline_rank is None
        ),
    ),
    MegatronRule(
        "layout excludes the other split flags",
        f"{MLM}, validate_args; {CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__",
        "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments.",
        lambda ns, _: (
            ns.pipeline_model_parallel_layout is None
            or (
                not _uneven(ns)
                and ns.num_layers_per_virtual_pipeline_stage is None
                and ns.num_virtual_stages_per_pipeline_rank is None
                and not ns.account_for_embedding_in_pipeline_split
                and not ns.account_for_loss_in_pipeline_split
            )
        ),
    ),
    MegatronRule(
        "layout string",
        f"{CORE}/transformer/pipeline_parallel_layer_layout.py, PipelineParallelLayerLayout "
        "(__init__, validate_layer_layout)",
        "pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size / Loss must be "
        "specified exactly once / the number of decoder layers must be num_layers",
        lambda ns, _: _layout_ok(ns),
    ),
    MegatronRule(
        "interleaving needs a pipeline",
        f"{MLM}, validate_args",
        "When interleaved schedule is used, pipeline-model-parallel size should be greater than 1 (greater than "
        "2 when p2p communication overlap is disabled)",
        lambda ns, _: (
            not (ns.num_virtual_stages_per_pipeline_rank or ns.num_layers_per_virtual_pipeline_stage)
            or ns.pipeline_model_parallel_size > (1 if ns.overlap_p2p_comm else 2)
        ),
    ),
    MegatronRule(
        "interleaved micro-batch groups",
        f"{CORE}/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving",
        "The number of contiguous micro-batches in a virtual pipeline stage should range in [PP, M] / The "
        "remainder of M (the total micro-batches) divided by N (number of contiguous micro-batches in a virtual "
        "pipeline stage) should be 0, or larger than or equal to the pipeline-parallel size",
        lambda ns, _: _group_rule(ns),
    ),
    MegatronRule(
        "recompute settings",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__",
        'Using recompute_granularity: full so recompute_method must be "block" or "uniform" / When using '
        "recompute_granularity: full recompute_num_layers must be between 1 and num_layers_per_pipeline_rank / "
        "When using recompute_granularity: selective recompute_num_layers must be None.",
        lambda ns, _: (
            ns.recompute_granularity is None
            or (ns.recompute_granularity == "selective" and ns.recompute_num_layers is None)
            or (
                ns.recompute_granularity == "full"
                and ns.recompute_method in ("uniform", "block")
                and ns.recompute_num_layers is not None
                and ns.recompute_num_layers >= 1
            )
        ),
    ),
    MegatronRule(
        "recompute modules",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__",
        "Invalid choices for recompute_modules (allowed: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, "
        "shared_experts)",
        lambda ns, _: (
            ns.recompute_granularity != "selective"
            or not ns.recompute_modules
            or set(ns.recompute_modules)
            <= {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"}
        ),
    ),
    MegatronRule(
        "offload modules",
        f"{CORE}/transformer/transformer_config.py, TransformerConfig.__post_init__",
        "Invalid choices for offload_modules (allowed: core_attn, attn_proj, expert_fc1, moe_act, attn_norm, "
        "mlp_norm, qkv_linear) / attn_proj cannot be set to offload_modules alone without core_attn",
        lambda ns, _: (
            not ns.fine_grained_activation_offloading
            or (
                bool(ns.offload_modules)
                and set(ns.offload_modules)
                <= {"core_attn", "attn_proj", "expert_fc1", "moe_act", "attn_norm", "mlp_norm", "qkv_linear"}
                and ("attn_proj" not in ns.offload_modules or "core_attn" in ns.offload_modules)
            )
        ),
    ),
    MegatronRule(
        "param-gather overlap needs grad-reduce overlap",
        f"{MLM}, validate_args",
        "Must use --overlap-param-gather with --overlap-grad-reduce",
        lambda ns, _: not ns.overlap_param_gather or ns.overlap_grad_reduce,
    ),
    MegatronRule(
        "param-gather overlap needs sharded parameters",
        f"{MLM}, validate_args",
        "--overlap-param-gather only supported with distributed optimizer or megatron fsdp",
        lambda ns, _: not ns.overlap_param_gather or ns.use_distributed_optimizer or ns.use_megatron_fsdp,
    ),
    MegatronRule(
        "Megatron-FSDP checkpoint format",
        f"{MLM}, validate_args (use_megatron_fsdp)",
        "Megatron FSDP only supports fsdp_dtensor checkpoint format",
        lambda ns, _: not _fsdp(ns) or ns.ckpt_format == "fsdp_dtensor",
    ),
    MegatronRule(
        "Megatron-FSDP connections",
        f"{MLM}, validate_args (use_megatron_fsdp)",
        "FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS value large than one",
        lambda ns, ctx: not _fsdp(ns) or ctx.env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1",
    ),
    MegatronRule(
        "Megatron-FSDP weight hash",
        f"{MLM}, validate_args (use_megatron_fsdp)",
        "check_weight_hash_across_dp_replicas_interval is not supported with optim_grads_params",
        lambda ns, _: (
            not _fsdp(ns)
            or ns.data_parallel_sharding_strategy != "optim_grads_params"
            or ns.check_weight_hash_across_dp_replicas_interval is None
        ),
    ),
    MegatronRule(
        "tensor/context parallel connections",
        f"{MLM}, validate_args (tensor or context parallelism before compute capability 10)",
        "Using tensor model parallelism or context parallelism require setting the environment variable "
        "CUDA_DEVICE_MAX_CONNECTIONS to 1",
        lambda ns, ctx: (
            not _pre_blackwell_tp_cp(ns, ctx)
            or _fsdp(ns)  # with Megatron-FSDP validate_args only warns
            or ctx.env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1"
        ),
    ),
)


def validate_megatron(
    args: Sequence[str],
    world_size: int,
    env: Mapping[str, str] | None = None,
    device_arch: int = 9,
) -> MegatronCheck:
    """Parse `args` with Megatron's option table, derive what validate_args derives and run every rule.

    Raises MegatronArgumentError where Megatron's argparse would exit (unknown flag, bad choice or type).
    """
    ctx = MegatronContext(world_size, dict(env or {}), device_arch)
    ns = _derive(parse_megatron_args(args), ctx)
    failures = tuple(f"{r.name}: {r.message} ({r.source})" for r in RULES if not r.holds(ns, ctx))
    return MegatronCheck(ns, failures)


def padded_vocab_size(vocab: int, ns: argparse.Namespace) -> int:
    """The embedding rows Megatron builds for a tokenizer of `vocab` tokens (megatron/training/tokenizer
    `_vocab_size_with_padding`: up to a multiple of make_vocab_size_divisible_by × t)."""
    multiple = int(ns.make_vocab_size_divisible_by) * int(ns.tensor_model_parallel_size)
    return -(-vocab // multiple) * multiple
