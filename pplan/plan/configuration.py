"""One parallel configuration, validated: the identities d = GPUs / (t·p·cp) and m = B / (b·d), and every
divisibility rule the model and the schedule impose, each enforced with a one-line error and the nearest fix.

Symbols: t tensor parallel, p pipeline ranks, v chunks per rank, cp context parallel, d data parallel,
b micro-batch (sequences), m micro-batches per step, B global batch (sequences). The identity
m = B / (b·d) is Megatron-LM's (`num_microbatches_calculator.py` asserts B % (b·d) == 0).
"""

from __future__ import annotations

from pplan.errors import ConfigError
from pplan.plan.copies import plan_constructor
from pplan.plan.knobs import (
    DEFAULT_RECOMPUTE_MODULES,
    MODEL_RECOMPUTE_MODULES,
)
from pplan.plan.layout import check_end_layers, make_layout
from pplan.plan.records import Plan, PlanRequest
from pplan.plan.rules import canonical_modules, canonical_offload, ep_overlap_refusal
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import STACKS
from pplan.schedules import ScheduleFamily, schedule_family
from pplan.schedules.rules import nearest_valid, need_p


def _divisors_near(n: int, target: int) -> list[int]:
    divs = [k for k in range(1, n + 1) if n % k == 0]
    return sorted(sorted(divs, key=lambda k: (abs(k - target), k))[:3])


def _check_model_split(model: ModelSpec, t: int) -> None:
    a, g = model.num_attention_heads, model.kv_heads
    if a % t:
        raise ConfigError(
            "--tp", f"t={t} does not divide the {a} attention heads", f"use t in {_divisors_near(a, t)}"
        )
    if g % t:
        raise ConfigError(
            "--tp",
            f"t={t} does not divide the {g} key/value heads (Megatron needs num_query_groups % t == 0)",
            f"use t in {_divisors_near(g, t)}",
        )
    if (model.moe is None or model.moe.first_dense_layers) and model.ffn_hidden_size % t:
        raise ConfigError(
            "--tp",
            f"t={t} does not divide ffn_hidden_size={model.ffn_hidden_size}",
            f"use t in {_divisors_near(model.ffn_hidden_size, t)}",
        )


def _chunks_per_rank(kind: ScheduleFamily, vp: int | None) -> int:
    """Model chunks each rank holds (dualpipe: its two stage copies count as one chunk of the down pipeline)."""
    if kind.fixed_v is not None:
        if vp is not None and vp != kind.fixed_v:
            raise ConfigError(
                "--vp", f"{kind.name} uses {kind.fixed_v} chunk(s) per rank, got --vp {vp}", "drop --vp"
            )
        return kind.fixed_v
    if vp is None or vp < 2:
        raise ConfigError("--vp", f"{kind.name} needs --vp ≥ 2 chunks per rank", "pass e.g. --vp 2")
    return vp


def _check_pipeline(kind: ScheduleFamily, p: int, m: int, per_microbatch: int) -> None:
    """Nothing when the family runs p ranks and m micro-batches, else a ConfigError: on --pp from the family's
    rule on p, on the global batch (with the nearest valid m) from its rule on m. Checked by the rules alone: the
    explicit schedule (O(p·v·m) actions) is built only when something draws or exports it.

    `per_microbatch` = b·d sequences per micro-batch step, so m ↦ global batch = m·b·d in the suggestion.
    """
    need_p(kind.name, p, kind.p_problem)
    problem = kind.m_problem(p, m)
    if problem is not None:
        lower, upper = nearest_valid(m, lambda c: kind.m_problem(p, c) is None, m + 8 * p + 1)
        options = [c for c in (lower, upper) if c is not None]
        fix = ", ".join(f"--global-batch {c * per_microbatch} (m={c})" for c in options)
        raise ConfigError(
            "--global-batch",
            f"m = {m} micro-batches breaks {kind.name}'s rule at p={p}: {kind.name} {problem}",
            f"use {fix}" if fix else "choose another global batch",
        )


def _check_tp_comm_overlap(req: PlanRequest) -> None:
    """Overlapping the tensor-parallel collectives needs a stack that can, and sequence parallelism (both
    megatron-core's userbuffers and torchtitan's async TP overlap all-gathers and reduce-scatters)."""
    if STACKS[req.stack].tp_comm_overlap is None:
        raise ConfigError(
            "--tp-comm-overlap", f"the {req.stack} stack does not overlap tensor-parallel collectives with GEMMs",
            "drop --tp-comm-overlap or use --stack megatron-core",
        )  # fmt: skip
    if not req.sequence_parallel:
        raise ConfigError(
            "--tp-comm-overlap", "overlaps the all-gathers and reduce-scatters of sequence parallelism",
            "drop --no-sequence-parallel or --tp-comm-overlap",
        )  # fmt: skip


def make_plan(model: ModelSpec, req: PlanRequest) -> Plan:
    """Validate `req` against `model` and derive d, m, v and the layer layout."""
    kind = schedule_family(req.schedule)
    if kind.fixed_v == 1 and req.vp not in (None, 1):
        raise ConfigError(
            "--vp",
            f"{kind.name} runs one chunk per rank, got --vp {req.vp}",
            "use --schedule interleaved-1f1b",
        )
    v = _chunks_per_rank(kind, None if req.vp == 1 and kind.fixed_v == 1 else req.vp)
    t, p, cp = req.tp, req.pp, req.cp
    # the end chunks' counts first: a --first-stage-layers over the model's layers is that flag's fault alone
    check_end_layers(model.num_layers, p if kind.placement == "dual" else p * v, req.first_stage_layers,
                     req.last_stage_layers)  # fmt: skip
    _check_model_split(model, t)
    seq_len = req.seq_len or model.seq_len
    if seq_len % cp:
        raise ConfigError(
            "--cp", f"cp={cp} does not divide the sequence length {seq_len}", "choose cp dividing it"
        )
    if req.sequence_parallel and t > 1 and (seq_len // cp) % t:
        raise ConfigError(
            "--seq-len",
            f"sequence parallelism splits the {seq_len // cp} tokens per context rank over t={t}, which does not divide",
            "choose a sequence length divisible by t·cp, or --no-sequence-parallel",
        )
    if req.tp_comm_overlap and t > 1:
        _check_tp_comm_overlap(req)
    model_parallel = t * p * cp
    if req.gpus % model_parallel:
        lower = req.gpus // model_parallel * model_parallel
        ok = [n for n in (lower, lower + model_parallel) if n > 0]
        raise ConfigError(
            "--gpus",
            f"{req.gpus} GPUs are not a multiple of t·p·cp = {t}·{p}·{cp} = {model_parallel}",
            f"use --gpus in {ok}",
        )
    d = req.gpus // model_parallel
    per_step = req.micro_batch * d
    if req.global_batch % per_step:
        lower = req.global_batch // per_step * per_step
        ok = [n for n in (lower, lower + per_step) if n > 0]
        micro_ok = [b for b in range(1, 17) if req.global_batch % (b * d) == 0]
        hint = f"use --global-batch in {ok}"
        if micro_ok:
            hint += f", or --micro-batch in {micro_ok[:6]}"
        raise ConfigError(
            "--global-batch",
            f"global batch {req.global_batch} is not a multiple of micro-batch × d = {req.micro_batch} × {d} = {per_step}",
            hint,
        )
    m = req.global_batch // per_step
    shard_group = _shard_group(req.shard_group, d * cp)
    if (
        req.activation_model == "korthikanti"
        and req.recompute == "selective"
        and tuple(req.recompute_modules) != DEFAULT_RECOMPUTE_MODULES
    ):
        raise ConfigError(
            "--recompute-modules", "Korthikanti et al.'s Table 2 covers their selective recompute (core_attn) only",
            "use --activation-model itemised, or --recompute-modules core_attn",
        )  # fmt: skip
    if req.offload_modules and req.activation_model == "korthikanti":
        raise ConfigError(
            "--offload-modules", "Korthikanti et al.'s Table 2 has no per-tensor items to offload",
            "use --activation-model itemised, or drop --offload-modules",
        )  # fmt: skip
    if req.offload_layers >= model.num_layers:
        raise ConfigError(
            "--offload-layers", f"megatron-core offloads fewer layers than the model's {model.num_layers}",
            f"use --offload-layers below {model.num_layers}",
        )  # fmt: skip
    _check_experts(model, req, t * cp * d)
    if req.memory_limit is not None and not kind.tuned:
        raise ConfigError(
            "--memory-limit", f"applies to --schedule auto, not {kind.name}",
            "add --schedule auto, or drop --memory-limit",
        )  # fmt: skip
    if req.fp8_swiglu_input and model.moe is None:
        raise ConfigError(
            "--fp8-swiglu-input", f"keeps routed experts' SwiGLU inputs in FP8; {model.name} has no routed experts",
            "drop --fp8-swiglu-input",
        )  # fmt: skip
    if req.recompute == "selective":
        for module in req.recompute_modules:
            need = MODEL_RECOMPUTE_MODULES.get(module)
            if need is not None and getattr(model, need[0]) is None:
                raise ConfigError(
                    "--recompute-modules", f"{module} recomputes part of {need[1]}; {model.name} has none",
                    f"drop {module}",
                )  # fmt: skip
    layout = make_layout(kind, model.num_layers, p, v, req.first_stage_layers, req.last_stage_layers, model)
    _check_pipeline(kind, p, m, per_step)
    recompute_layers = _recompute_layers(req, max(c.layers for c in layout.chunks))
    plan: Plan = _plan_from(req, kind, t, p, v, cp, d, m, seq_len, layout, shard_group, recompute_layers)
    return plan


def _check_experts(model: ModelSpec, req: PlanRequest, stage_ranks: int) -> None:
    """Expert parallelism's rules, each a one-line ConfigError: a routed model; ep divides the experts and etp
    the expert width; ep·etp divides one stage's t·cp·d ranks (megatron-core's expert decomposition); tensor
    parallelism in a routed model needs sequence parallelism (megatron-core asserts it)."""
    check_expert_split(model, req.ep, req.etp)
    if model.moe is None:
        return
    if stage_ranks % (req.ep * req.etp):
        raise ConfigError(
            "--ep", f"ep·etp = {req.ep * req.etp} does not divide the t·cp·d = {stage_ranks} ranks of a stage",
            f"use ep·etp in {_divisors_near(stage_ranks, req.ep * req.etp)}",
        )  # fmt: skip
    if req.tp > 1 and not req.sequence_parallel:
        raise ConfigError(
            "--no-sequence-parallel", "tensor parallelism in a routed model needs sequence parallelism "
            "(megatron-core asserts it)", "drop --no-sequence-parallel",
        )  # fmt: skip


def check_expert_split(model: ModelSpec, ep: int, etp: int = 1) -> None:
    """The model's own rules on expert parallelism (a plan's or a search's), each a one-line ConfigError: a routed
    model to split; ep divides its experts, etp their width."""
    moe = model.moe
    if moe is None:
        for flag, value in (("--ep", ep), ("--etp", etp)):
            if value > 1:
                raise ConfigError(
                    flag,
                    f"{model.name} has no routed experts to split",
                    f"drop {flag}, or use a model with [moe]",
                )
        return
    if moe.num_experts % ep:
        raise ConfigError(
            "--ep", f"ep={ep} does not divide the {moe.num_experts} routed experts",
            f"use ep in {_divisors_near(moe.num_experts, ep)}",
        )  # fmt: skip
    if moe.expert_ffn_hidden_size % etp:
        raise ConfigError(
            "--etp", f"etp={etp} does not divide the experts' width {moe.expert_ffn_hidden_size}",
            f"use etp in {_divisors_near(moe.expert_ffn_hidden_size, etp)}",
        )  # fmt: skip


def check_precision(hardware: HardwareSpec, precision: str) -> None:
    """The GPU runs the precision: FP8 needs FP8 tensor cores (`gpu.peak_fp8_tflops`), MXFP8 block-scaled ones
    (`gpu.block_scaled_fp8`, Blackwell); else a ConfigError on --precision."""
    if precision != "bf16" and hardware.gpu.peak_fp8_tflops is None:
        raise ConfigError(
            "--precision", f"{hardware.gpu.name} has no FP8 tensor cores (its profile states no peak_fp8_tflops)",
            "use --precision bf16, or an H100/H200/B200 profile",
        )  # fmt: skip
    if precision == "mxfp8" and not hardware.gpu.block_scaled_fp8:
        raise ConfigError(
            "--precision", f"{hardware.gpu.name} has no block-scaled (MXFP8) tensor cores",
            "use --precision fp8, or a Blackwell profile (b200-180gb)",
        )  # fmt: skip


def _shard_group(requested: int | None, replicas: int) -> int | None:
    """The plan's shard group: None for all `replicas` (= d·cp) data-parallel GPUs; else S, which must divide them."""
    if requested is None or requested == replicas:
        return None
    if replicas % requested:
        raise ConfigError(
            "--shard-group", f"S = {requested} does not divide the d·cp = {replicas} data-parallel GPUs",
            f"use --shard-group in {_divisors_near(replicas, requested)}",
        )  # fmt: skip
    return requested


def _recompute_layers(req: PlanRequest, most_layers: int) -> int | None:
    """N of the full-recompute method, checked against the chunks; None for every layer its own checkpoint."""
    n = req.recompute_layers
    if n is None:
        return None
    if n > most_layers:
        raise ConfigError(
            "--recompute-layers", f"{n} is more than the {most_layers} layers of the largest chunk",
            f"use --recompute-layers from 1 to {most_layers}",
        )  # fmt: skip
    if req.recompute_method == "uniform" and n == 1:
        return None  # one checkpoint per layer: plain full recompute
    return n


_plan_from = plan_constructor(
    Plan,
    {
        "canonical_offload": canonical_offload,
        "canonical_modules": canonical_modules,
        "ep_overlap_refusal": ep_overlap_refusal,
    },
)
"""`Plan` from a validated request and what `make_plan` derived, one keyword per setting (pplan.plan.copies)."""
