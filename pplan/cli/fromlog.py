"""`pplan explain --from-log FILE`: read a training log (pplan.logs), rebuild its plan with the user's flags on top,
and print predicted against measured (pplan.logs.compare) as tables or the `pplan.fromlog/1` JSON document."""

from __future__ import annotations

from typing import Any

import typer

from pplan.cli.app import json_text
from pplan.documents.fromlog import FromLogReport

FLAG = "--from-log"


def _given(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def explain_from_log(
    ctx: typer.Context,
    path: str,
    model: str,
    hardware: str,
    settings: dict[str, Any],
    values: dict[str, Any],
    as_json: bool,
) -> None:
    """Run `explain --from-log` (module docstring); `values` are explain's settings as PlanRequest keywords."""
    from pplan.logs.compare import report
    from pplan.logs.files import read_record, steady_of
    from pplan.logs.rebuild import rebuild
    from pplan.logs.torchtitan import for_plan

    record = read_record(path, FLAG)
    if not record.tps_steps:  # a log without a steady state is refused before its plan is asked for
        steady_of(record, path, FLAG)
    flags = {k: v for k, v in values.items() if k in settings and _given(ctx, k)}
    if _given(ctx, "distributed_optimizer") and ctx.params.get("distributed_optimizer"):
        flags["zero_stage"] = 1
    rebuilt = rebuild(
        record,
        model if _given(ctx, "model") else None,
        hardware if _given(ctx, "hardware") else None,
        flags,
        values,
    )
    request = rebuilt.request
    seq = request.seq_len or rebuilt.model.seq_len
    record = for_plan(record, request.gpus, request.global_batch, seq, request.tp, request.pp, request.cp)
    doc = report(record, steady_of(record, path, FLAG), rebuilt, path)
    if as_json:
        print(json_text(doc.model_dump(mode="json", by_alias=True)))
    else:
        print(render(doc))


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def _value(quantity: str, x: float) -> str:
    if quantity == "step_s":
        return f"{x:.3f} s"
    if quantity == "tokens_per_s":
        return f"{x:,.0f} tok/s"
    if quantity.startswith("mfu"):
        return f"{x:.1%}"
    return f"{x / 2**30:.1f} GiB"


def render(doc: FromLogReport) -> str:
    """The text `explain --from-log` prints."""
    lines = [f"From log {doc.log} ({doc.stack or 'unknown stack'})"]
    lines.append(f"  model:    {doc.model_source}")
    m = doc.explain.model
    lines.append(
        f"            {m.num_layers} layers, hidden {m.hidden_size}, {m.num_attention_heads} heads "
        f"({m.num_kv_heads} KV), FFN {m.ffn_hidden_size} ({m.mlp}), vocabulary {m.vocab_size:,}"
    )
    lines.append(f"  hardware: {doc.hardware_source}")
    if doc.calibrated_on_user_runs:
        lines.append("  (the hardware profile is calibrated on your own runs: pplan calibrate)")
    lines.append("Read from the log:")
    for f in doc.read:
        lines.append(f"  {f.field} = {f.value}  [{f.source}]")
    if doc.assumed:
        lines.append("Assumed (not in the log, no flag given):")
        lines.extend(f"  {a}" for a in doc.assumed)
    lines.append(f"Measured step: {doc.steady_state.description}")
    lines.append("Predicted against measured:")
    lines.append(f"  {'':<18}{'predicted':>16}{'measured':>16}{'error':>9}")
    names = {
        "step_s": "step time",
        "tokens_per_s": "tokens/s",
        "mfu": "MFU (full s×s)",
        "mfu_causal": "MFU (causal)",
        "peak_memory_bytes": "peak memory",
    }
    for row in doc.comparison:
        lines.append(
            f"  {names[row.quantity]:<18}{_value(row.quantity, row.predicted):>16}"
            f"{_value(row.quantity, row.measured):>16}{_pct(row.error):>9}"
        )
    if doc.logged_tflops_per_gpu is not None:
        lines.append(
            f"  the log's own throughput: {doc.logged_tflops_per_gpu:.1f} TFLOP/s/GPU (its FLOP count)"
        )
    if doc.logged_mfu is not None:
        lines.append(f"  the log's own MFU: {doc.logged_mfu:.1%}")
    perf = doc.explain.performance
    if perf is not None:
        shown = ", ".join(f"{k} {v:.3f}" for k, v in perf.breakdown_s.items() if v > 0)
        lines.append(f"  predicted step, busiest rank (s): {shown}")
        lines.append(f"  {perf.confidence}")
    lines.append(f"What would close the gap ({_pct(doc.gap)} predicted against measured), most likely first:")
    shown_terms = [t for i, t in enumerate(doc.gap_terms) if i < 6 or t.term.startswith("MoE")]
    for term in shown_terms:
        mark = "plausible" if term.plausible else "unlikely"
        lines.append(f"  {term.term}: {term.why} ({mark})")
    return "\n".join(lines)
