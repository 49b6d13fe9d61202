"""`pplan explain`: one configuration, every number with its derivation; and `pplan schema` for the JSON shape."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, TypeVar

import typer
from pydantic import BaseModel

from pplan import launchers
from pplan.cli.app import Launcher, app, console, json_text
from pplan.documents.explain import ExplainReport, RecommendReport
from pplan.errors import ConfigError
from pplan.explain import explain as explain_plan
from pplan.plan.configuration import PlanRequest, make_plan
from pplan.profiles.catalog import load_hardware, load_model
from pplan.render.explain import render_explain

T = TypeVar("T")

MAX_TRAIN_TOKENS = 1e18
"""Largest --train-tokens explain takes: a million times Llama 3's 15 T tokens, so the time to train stays a
finite, meaningful number."""

# The default example: the seed's Llama-3-70B shape on H100s, t = 8, p = 4, d = 64, m = 16.
DEFAULT_MODEL = "llama3-70b"
DEFAULT_HARDWARE = "h100-sxm-80gb"


class Recompute(StrEnum):
    none = "none"
    selective = "selective"
    full = "full"


class GradDtype(StrEnum):
    bf16 = "bf16"
    fp32 = "fp32"


class PassDurations(StrEnum):
    analytic = "analytic"
    unit = "unit"


class ActivationModel(StrEnum):
    itemised = "itemised"
    korthikanti = "korthikanti"


def _pick(flag: str, given: T | None, default: T, used: list[str]) -> T:
    """`given`, or `default` recorded as an assumption so `explain` says what it assumed."""
    if given is None:
        used.append(f"{flag} {default}")
        return default
    return given


@app.command()
def explain(
    model: Annotated[
        str | None, typer.Option(help="Bundled model name, a .toml file or a HF config.json.")
    ] = None,
    hardware: Annotated[str | None, typer.Option(help="Bundled hardware name or a .toml file.")] = None,
    gpus: Annotated[int | None, typer.Option(help="Total GPUs.")] = None,
    global_batch: Annotated[int | None, typer.Option(help="Global batch, in sequences.")] = None,
    seq_len: Annotated[int | None, typer.Option(help="Sequence length (default: the model's).")] = None,
    tp: Annotated[int | None, typer.Option(help="Tensor-parallel degree t.")] = None,
    pp: Annotated[int | None, typer.Option(help="Pipeline-parallel ranks p.")] = None,
    vp: Annotated[int | None, typer.Option(help="Model chunks per pipeline rank v (interleaving).")] = None,
    cp: Annotated[int, typer.Option(help="Context-parallel degree (sequence split).")] = 1,
    micro_batch: Annotated[int | None, typer.Option(help="Micro-batch size b, in sequences.")] = None,
    schedule: Annotated[
        str | None,
        typer.Option(
            help="gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv, dualpipev, dualpipe (or torch's names)."
        ),
    ] = None,
    recompute: Annotated[Recompute, typer.Option(help="Activation recomputation.")] = Recompute.none,
    sequence_parallel: Annotated[bool, typer.Option(help="Megatron sequence parallelism (t > 1).")] = True,
    flash_attention: Annotated[
        bool, typer.Option(help="Flash attention (no attention-score tensors).")
    ] = True,
    distributed_optimizer: Annotated[
        bool, typer.Option("--distributed-optimizer", help="Shard optimizer states over d (ZeRO-1).")
    ] = False,
    zero_stage: Annotated[int, typer.Option(help="ZeRO stage 0-3 (1 = distributed optimizer).")] = 0,
    grad_dtype: Annotated[GradDtype, typer.Option(help="Gradient dtype: fp32 (18 B/param) or bf16 (16).")] = (
        GradDtype.fp32
    ),
    activation_model: Annotated[
        ActivationModel, typer.Option(help="itemised (this architecture) or korthikanti (GPT-3 formula).")
    ] = ActivationModel.itemised,
    first_stage_layers: Annotated[int | None, typer.Option(help="Layers on the first chunk.")] = None,
    last_stage_layers: Annotated[int | None, typer.Option(help="Layers on the last chunk.")] = None,
    overlap_grad_reduce: Annotated[
        bool,
        typer.Option(help="Gradient sync behind the last backward passes (Megatron --overlap-grad-reduce)."),
    ] = True,
    overlap_param_gather: Annotated[
        bool, typer.Option(help="Distributed optimizer's parameter all-gather behind the next forward.")
    ] = True,
    train_tokens: Annotated[
        float | None, typer.Option(help="Token budget to report the time to train, e.g. 15e12.")
    ] = None,
    pass_durations: Annotated[
        PassDurations,
        typer.Option(
            help="Simulate the schedule with analytic pass times and link latencies, or unit passes."
        ),
    ] = PassDurations.analytic,
    all_stages: Annotated[bool, typer.Option(help="Show every stage, not a sample.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Emit the pplan.explain/1 JSON document.")] = False,
    launcher_format: Annotated[
        Launcher | None,
        typer.Option(
            "--format", help="megatron (flags) or torchtitan (TOML) for this plan, instead of tables."
        ),
    ] = None,
) -> None:
    """Explain one configuration: memory per stage, traffic, bubble, and every assumption."""
    if train_tokens is not None and not (
        math.isfinite(train_tokens) and 0 < train_tokens <= MAX_TRAIN_TOKENS
    ):
        raise ConfigError(
            "--train-tokens",
            f"must be a finite number above 0 and at most {MAX_TRAIN_TOKENS:g}, got {train_tokens:g}",
            "e.g. --train-tokens 15e12",
        )
    used: list[str] = []
    model_spec = load_model(_pick("--model", model, DEFAULT_MODEL, used))
    hardware_spec = load_hardware(_pick("--hardware", hardware, DEFAULT_HARDWARE, used))
    if distributed_optimizer and zero_stage not in (0, 1):
        raise ConfigError(
            "--distributed-optimizer", f"conflicts with --zero-stage {zero_stage}", "pass one of them"
        )
    request = PlanRequest(
        gpus=_pick("--gpus", gpus, 2048, used),
        global_batch=_pick("--global-batch", global_batch, 1024, used),
        micro_batch=_pick("--micro-batch", micro_batch, 1, used),
        tp=_pick("--tp", tp, 8, used),
        pp=_pick("--pp", pp, 4, used),
        vp=vp,
        cp=cp,
        schedule=_pick("--schedule", schedule, "1f1b", used),
        seq_len=seq_len,
        recompute=recompute.value,
        sequence_parallel=sequence_parallel,
        flash_attention=flash_attention,
        zero_stage=1 if distributed_optimizer else zero_stage,
        grad_dtype=grad_dtype.value,
        activation_model=activation_model.value,
        first_stage_layers=first_stage_layers,
        last_stage_layers=last_stage_layers,
        overlap_grad_reduce=overlap_grad_reduce,
        overlap_param_gather=overlap_param_gather,
    )
    if launcher_format is not None:
        if as_json:
            raise ConfigError(
                "--json", f"asks for the JSON document, --format {launcher_format.value} for launcher settings",
                "drop one of them",
            )  # fmt: skip
        plan = make_plan(model_spec, request)
        print(launchers.launcher_text(launcher_format.value, model_spec, plan))
        return
    report = explain_plan(model_spec, hardware_spec, request, pass_durations.value, train_tokens)
    if used:
        note = "pplan's default example (pass the flag to change it): " + ", ".join(used)
        report = report.model_copy(update={"assumptions": [note, *report.assumptions]})
    if as_json:
        print(json_text(report.model_dump(mode="json", by_alias=True)))
    else:
        console.print(render_explain(report, all_stages))


@app.command()
def schema(
    name: Annotated[str, typer.Argument(help="Which document: explain or recommend.")] = "explain",
) -> None:
    """Print the JSON Schema of a pplan JSON document."""
    schemas: dict[str, type[BaseModel]] = {"explain": ExplainReport, "recommend": RecommendReport}
    if name not in schemas:
        raise ConfigError("schema", f"unknown document {name!r}", f"use one of: {', '.join(schemas)}")
    print(json_text(schemas[name].model_json_schema(by_alias=True, mode="serialization")))
