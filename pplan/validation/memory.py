"""Predicted against published per-GPU memory (`pplan validate --memory`): Korthikanti et al. 2022 (arXiv
2205.05198) Figure 1 (parameters and optimizer states, activations without recompute, activations with sequence
parallelism and selective recompute, for its 22B, 175B, 530B and 1T GPTs) and Figure 7 (the 175B's activations
under each technique as a share of no recompute), from pplan/validation/published_memory.json
(catalog.load_published_memory).

Each configuration of the paper's Table 3 becomes a `PlanRequest` (gpus = t·p, so d = 1; the schedule Megatron-LM
runs: 1F1B, interleaved 1F1B where v > 1; its global batch, so m = B/b = 1, 64, 280, 512) and goes through
`make_plan`, `cost.pipeline.activation_peaks` and `cost.memory.plan_memory`, the functions `pplan explain` uses.
The choice of m does not move the figures compared: a 1F1B first stage holds min(m, p) micro-batches of L/p
layers, an interleaved one 2(p − 1) + (v − 1)p + 1 chunks of L/(pv) layers, i.e. L·(1 + (p − 1)/(pv)) layers'
worth (Korthikanti §4.2.3), once m·v covers that warm-up; Table 3's m = 8p does for both interleaved runs (31 ≤ 192
and 139 ≤ 840 chunks) and m ≥ p for the 1F1B ones.

Compared stage: the first pipeline stage (rank 0). It holds the most micro-batches in flight under both
schedules, it is the stage Korthikanti's count is for, and in all four configurations it is also pplan's peak
stage (the last stage holds one micro-batch and the logits; `peak_rank` records it).

Predicted quantities, per GPU of the first stage, in GiB (2^30 bytes):
- parameters and optimizer: weights + gradients + optimizer states of `plan_memory` with ZeRO-0 and FP32
  gradients (2 + 4 + 12 = 18 bytes per parameter, `cost.memory.bytes_per_param`), embeddings, biases and
  LayerNorms included;
- activations: everything pplan's memory verdict counts as activations on that GPU: the transformer layers' peak
  (`ActivationPeaks.activation_bytes`), what the model ends add to it (embedding dropout mask; output-layer input
  and FP32 logits where the stage also holds the output layer) and the transient of one recomputed layer
  (`RankMemory.recompute_working_bytes`);
- Figure 7's shares: 100 × activations(setting) / activations(no recompute, no sequence parallelism).
Each is predicted with pplan's default activation model (`itemised`) and with `korthikanti` (the paper's Table 2
formula); for these GPT-3 layers the two count the same bytes. Nothing is fitted: a row whose error exceeds
`NOTE_ABOVE` carries one sentence naming the mechanism, with its size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast, get_args

from pplan.cost.memory import RankMemory, fp8_any_layout, plan_memory
from pplan.cost.pipeline import activation_peaks
from pplan.cost.usable import usable_bytes
from pplan.model.params import embedding_params, position_table_rows
from pplan.plan.configuration import make_plan
from pplan.plan.copies import settings_read
from pplan.plan.knobs import ActivationModel, Recompute
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import megatron_family

GIB = 2**30
DEFAULT_MODEL: ActivationModel = "itemised"
"""pplan's default activation model, whose errors the means are taken over."""
OTHER_MODEL: ActivationModel = "korthikanti"
assert {DEFAULT_MODEL, OTHER_MODEL} == set(get_args(ActivationModel))
NOTE_ABOVE = 0.03
"""Rows whose |error| exceeds this (above the ~2 % precision of reading the figures) get a reason."""
PARAMS_QUANTITY = "params + optimizer"
STAGE = (
    "the first pipeline stage: it holds the most micro-batches in flight, Figure 1's count is for it, and it is "
    "pplan's peak stage in all four configurations"
)


@dataclass(frozen=True, slots=True)
class FirstStage:
    """One GPU of the first pipeline stage of one plan, in bytes, as pplan's memory model holds it."""

    params_bytes: int
    """Weights + gradients + optimizer states."""
    embedding_params_bytes: int
    """Of params_bytes: the word and position embeddings the first stage holds."""
    layers_bytes: int
    """Transformer layers' activations at the peak."""
    ends_bytes: int
    """What the model ends add to that peak (embedding dropout mask; output layer's input and logits at p = 1)."""
    recompute_transient_bytes: int
    """One recomputed layer's transient: its attention scores (selective) or all its activations (full)."""
    holds_output: bool
    """The first stage also holds the output layer (p = 1)."""
    peak_rank: int
    """The rank with the most activation bytes (layers + ends + transient)."""

    @property
    def activations_bytes(self) -> int:
        return self.layers_bytes + self.ends_bytes + self.recompute_transient_bytes


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One bar of Figure 1: published against predicted GiB per GPU of the first stage."""

    label: str
    run: str
    quantity: str
    published_gib: float
    predicted_gib: float
    """With the default activation model."""
    korthikanti_gib: float
    """With the `korthikanti` activation model (Table 2's formula)."""
    parts_gib: tuple[tuple[str, float], ...]
    """What predicted_gib sums (default activation model)."""
    reason: str | None

    @property
    def error(self) -> float:
        """(predicted − published) / published."""
        return (self.predicted_gib - self.published_gib) / self.published_gib

    @property
    def korthikanti_error(self) -> float:
        return (self.korthikanti_gib - self.published_gib) / self.published_gib


@dataclass(frozen=True, slots=True)
class ShareRow:
    """One bar of Figure 7: activations under a technique as a percentage of no recompute."""

    setting: str
    run: str
    published_percent: float
    predicted_percent: float
    korthikanti_percent: float
    reason: str | None

    @property
    def error(self) -> float:
        """(predicted − published) / published."""
        return (self.predicted_percent - self.published_percent) / self.published_percent

    @property
    def korthikanti_error(self) -> float:
        return (self.korthikanti_percent - self.published_percent) / self.published_percent


@dataclass(frozen=True, slots=True)
class MemoryValidation:
    name: str
    source: str
    precision: str
    hardware: str
    assumed: dict[str, Any]
    stage: str
    """Which pipeline stage is compared, and why."""
    activation_model: str
    """The activation model of the predicted values (the `korthikanti` ones are beside them)."""
    note_above: float
    figure_1_source: str
    figure_1: tuple[MemoryRow, ...]
    figure_7_source: str
    figure_7: tuple[ShareRow, ...]

    @property
    def figure_1_mape(self) -> float:
        """Mean |error| of Figure 1's rows (default activation model)."""
        return _mean(abs(r.error) for r in self.figure_1)

    @property
    def figure_7_mape(self) -> float:
        return _mean(abs(r.error) for r in self.figure_7)

    @property
    def figure_1_korthikanti_mape(self) -> float:
        return _mean(abs(r.korthikanti_error) for r in self.figure_1)

    @property
    def figure_7_korthikanti_mape(self) -> float:
        return _mean(abs(r.korthikanti_error) for r in self.figure_7)


def _mean(values: Iterable[float]) -> float:
    listed = list(values)
    return sum(listed) / len(listed)


_DERIVED_HERE = frozenset(
    {"vp", "schedule", "seq_len", "recompute", "sequence_parallel", "activation_model", "release"}
)
"""What `request` derives (the schedule from v) or is given (the setting and activation model compared); the rest
of a configuration's settings are read by name from it and the set's assumptions."""


def request(
    config: dict[str, Any],
    assumed: dict[str, Any],
    recompute: Recompute,
    sequence_parallel: bool,
    model: ActivationModel,
) -> PlanRequest:
    """The plan of one Table 3 configuration under one setting and activation model `model`."""
    vp = config["vp"]
    family = megatron_family(vp)
    read = settings_read(config, assumed, skip=_DERIVED_HERE)
    return PlanRequest(
        **read, vp=vp if family.fixed_v is None else None, schedule=family.name, recompute=recompute,
        sequence_parallel=sequence_parallel, activation_model=model,
    )  # fmt: skip


def first_stage(model: ModelSpec, plan: Plan, hardware: HardwareSpec) -> FirstStage:
    """What one GPU of `plan`'s first pipeline stage holds (module docstring)."""
    # the paper counts tensors, not the allocator's fragmentation: none is added here
    ranks = plan_memory(
        model,
        plan,
        usable_bytes(hardware, model, plan),
        activation_peaks(model, plan, hardware),
        0.0,
        fp8_any_layout(hardware),
    )
    first = ranks[0]
    per_param = (first.weights_bytes + first.grads_bytes + first.optimizer_bytes) / first.params
    rows = position_table_rows(model, plan.seq_len)
    embedding = sum(item.per_tp_rank(plan.tp) for item in embedding_params(model, rows))
    return FirstStage(
        params_bytes=first.weights_bytes + first.grads_bytes + first.optimizer_bytes,
        embedding_params_bytes=round(embedding * per_param),
        layers_bytes=first.activation_bytes,
        ends_bytes=first.extra_activation_bytes,
        recompute_transient_bytes=first.recompute_working_bytes,
        holds_output=plan.layout.chunks[0].has_output,
        peak_rank=max(range(len(ranks)), key=lambda r: (_activations(ranks[r]), -r)),
    )


def _activations(rank: RankMemory) -> int:
    return rank.activation_bytes + rank.extra_activation_bytes + rank.recompute_working_bytes


def run_label(config: dict[str, Any], plan: Plan) -> str:
    v = f" v{plan.vp}" if plan.vp > 1 else ""
    return f"{config['label']} t{plan.tp} p{plan.pp}{v} b{plan.micro_batch} m{plan.num_microbatches}"


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def params_reason(stage: FirstStage, published_gib: float) -> str:
    """Why pplan's parameter bytes exceed Figure 1's: the embeddings and the small per-layer tensors."""
    rest = stage.params_bytes - stage.embedding_params_bytes - published_gib * GIB
    return (
        "Figure 1 counts 18 bytes per weight of the layers' 12h² matrices only; the first stage also holds the "
        f"word and position embeddings ({_gib(stage.embedding_params_bytes)} at 18 B/parameter), and the "
        f"rest ({_gib(rest)}) is the layers' biases and LayerNorm weights plus the figure's reading."
    )


def _extras(stage: FirstStage, recompute: str) -> list[str]:
    """The activation bytes pplan counts beyond the transformer layers', each named with its size."""
    out = []
    if stage.ends_bytes:
        what = "the embedding dropout masks"
        if stage.holds_output:
            what += (
                " and, the first stage being also the last (p = 1), the output layer's input and FP32 logits"
            )
        out.append(f"the model ends ({_gib(stage.ends_bytes)}: {what})")
    if stage.recompute_transient_bytes:
        what = "its attention scores re-materialised" if recompute == "selective" else "all its activations"
        out.append(
            f"the transient of the layer being recomputed ({what}, {_gib(stage.recompute_transient_bytes)})"
        )
    return out


def activations_reason(stage: FirstStage, recompute: str, published_gib: float) -> str:
    """Why pplan's activation bytes differ from Figure 1's."""
    layers_error = stage.layers_bytes / (published_gib * GIB) - 1
    extras = " and ".join(_extras(stage, recompute)) or "nothing"
    return (
        f"The transformer layers alone are {layers_error:+.1%} off Figure 1 (Table 2's count for the first "
        f"stage); beyond them pplan holds {extras}, which the figure leaves out."
    )


def share_reason(stage: FirstStage, baseline: FirstStage, recompute: str, published_percent: float) -> str:
    """Why pplan's share of the no-recompute activations differs from Figure 7's."""
    layers_percent = 100 * stage.layers_bytes / baseline.layers_bytes
    extras = " and ".join(_extras(stage, recompute)) or "nothing"
    return (
        f"The layers alone give {layers_percent:.2f} % ({layers_percent / published_percent - 1:+.1%}); "
        f"beyond them pplan counts {extras} against {_gib(baseline.ends_bytes)} of model ends in the "
        "baseline, which weigh more in a small share."
    )


def validate_memory(
    data: dict[str, Any], load_model: Callable[[str], ModelSpec], hardware: HardwareSpec
) -> MemoryValidation:
    """Predict every bar of Figures 1 and 7 (module docstring)."""
    assumed = data["assumed"]
    configs = {c["label"]: c for c in data["configurations"]}

    def predict(config: dict[str, Any], recompute: Recompute, sp: bool) -> dict[str, tuple[Plan, FirstStage]]:
        model = load_model(config["model"])
        out: dict[str, tuple[Plan, FirstStage]] = {}
        for name in (DEFAULT_MODEL, OTHER_MODEL):
            plan = make_plan(model, request(config, assumed, recompute, sp, name))
            out[name] = (plan, first_stage(model, plan, hardware))
        return out

    fig1 = data["figure_1"]
    rows: list[MemoryRow] = []
    for bar in fig1["rows"]:
        config = configs[bar["label"]]
        base = predict(config, "none", False)
        plan, stage = base[DEFAULT_MODEL]
        published = float(bar["params_and_optimizer_gib"])
        params_gib = stage.params_bytes / GIB
        far = abs(params_gib / published - 1) > NOTE_ABOVE
        rows.append(
            MemoryRow(
                label=config["label"],
                run=run_label(config, plan),
                quantity=PARAMS_QUANTITY,
                published_gib=published,
                predicted_gib=params_gib,
                korthikanti_gib=base[OTHER_MODEL][1].params_bytes / GIB,
                parts_gib=(
                    ("embeddings", stage.embedding_params_bytes / GIB),
                    ("layers", (stage.params_bytes - stage.embedding_params_bytes) / GIB),
                ),
                reason=params_reason(stage, published) if far else None,
            )
        )
        for key, setting in fig1["settings"].items():
            recompute, sp = cast(Recompute, setting["recompute"]), bool(setting["sequence_parallel"])
            both = base if (recompute, sp) == ("none", False) else predict(config, recompute, sp)
            plan, stage = both[DEFAULT_MODEL]
            published = float(bar[key])
            predicted = stage.activations_bytes / GIB
            far = abs(predicted / published - 1) > NOTE_ABOVE
            rows.append(
                MemoryRow(
                    label=config["label"],
                    run=run_label(config, plan),
                    quantity=setting["quantity"],
                    published_gib=published,
                    predicted_gib=predicted,
                    korthikanti_gib=both[OTHER_MODEL][1].activations_bytes / GIB,
                    parts_gib=(
                        ("layers", stage.layers_bytes / GIB),
                        ("model ends", stage.ends_bytes / GIB),
                        ("recompute transient", stage.recompute_transient_bytes / GIB),
                    ),
                    reason=activations_reason(stage, recompute, published) if far else None,
                )
            )

    fig7 = data["figure_7"]
    config = configs[fig7["label"]]
    baseline = fig7["baseline"]
    base = predict(config, cast(Recompute, baseline["recompute"]), bool(baseline["sequence_parallel"]))
    shares: list[ShareRow] = []
    for bar in fig7["rows"]:
        recompute = cast(Recompute, bar["recompute"])
        both = predict(config, recompute, bool(bar["sequence_parallel"]))
        percent = {
            name: 100 * both[name][1].activations_bytes / base[name][1].activations_bytes
            for name in (DEFAULT_MODEL, OTHER_MODEL)
        }
        plan, stage = both[DEFAULT_MODEL]
        published = float(bar["published_percent"])
        far = abs(percent[DEFAULT_MODEL] / published - 1) > NOTE_ABOVE
        shares.append(
            ShareRow(
                setting=bar["setting"],
                run=run_label(config, plan),
                published_percent=published,
                predicted_percent=percent[DEFAULT_MODEL],
                korthikanti_percent=percent[OTHER_MODEL],
                reason=share_reason(stage, base[DEFAULT_MODEL][1], recompute, published) if far else None,
            )
        )
    return MemoryValidation(
        name=data["name"],
        source=data["source"],
        precision=data["precision"],
        hardware=data["hardware"],
        assumed=dict(assumed),
        stage=STAGE,
        activation_model=DEFAULT_MODEL,
        note_above=NOTE_ABOVE,
        figure_1_source=fig1["source"],
        figure_1=tuple(rows),
        figure_7_source=fig7["source"],
        figure_7=tuple(shares),
    )
