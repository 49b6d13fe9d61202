"""`pplan validate`: predicted against published time for every bundled run, in sample and with its set left out of
the fit, with the errors, the means and the worst; with --memory, also pplan's memory model against published
per-GPU memory.

Predicts each bundled set (`pplan.validation`), builds its `pplan.validate/3` block (`pplan.validation.document`)
and prints it as tables (`pplan.render.validate`) or, with --json, the whole document. --memory adds to the
step-time sets rather than replacing them, as --practice does: the terminal shows what the JSON document holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pplan.cli.app import TableOrJson, app, asks_json, console, format_option, json_alias, json_text

if TYPE_CHECKING:
    from pplan.documents.validate import ValidationSetOut


@app.command()
def validate(
    fit: Annotated[
        bool,
        typer.Option("--fit", help="Re-fit each GPU type's GEMM efficiency to all its sets (in sample)."),
    ] = False,
    practice: Annotated[
        bool,
        typer.Option("--practice", help="Also check where each published configuration ranks in recommend."),
    ] = False,
    memory: Annotated[
        bool,
        typer.Option(
            "--memory",
            help="Also compare pplan's memory model with the per-GPU memory Korthikanti et al. 2022 publish "
            "(Figures 1 and 7), printed after the step-time sets (with --json: the document's memory block).",
        ),
    ] = False,
    recent: Annotated[
        bool,
        typer.Option(
            "--recent",
            help="Also predict the bundled 2024–2026 published runs (Megatron-Bridge, NeMo, DGX Cloud, torchtitan, "
            "DeepSeek-V3) at their published cuts, out of sample, with the error per set and per axis.",
        ),
    ] = False,
    output: Annotated[TableOrJson, format_option("pplan.validate/3", None)] = "table",
    as_json: Annotated[bool, json_alias(None)] = False,
) -> None:
    """Predict every bundled published run and compare with its published step time."""
    as_json = asks_json(output, as_json)
    # the core loads only when the command runs, not for --help
    from pplan.documents.validate import ValidateDocument
    from pplan.profiles.catalog import (
        load_hardware,
        load_model,
        load_published_memory,
        load_published_runs,
        load_recent_runs,
    )
    from pplan.render.validate import (
        memory_tables,
        recent_tables,
        render_validation_set,
        scaling_table,
        summary_table,
    )
    from pplan.validation.document import (
        memory_document,
        recent_document,
        scaling_document,
        validation_set_document,
    )
    from pplan.validation.memory import validate_memory
    from pplan.validation.practice import practice_rows
    from pplan.validation.published import check_sets, strong_scaling
    from pplan.validation.recent import leave_one_set_out, predict_all

    bundled = load_published_runs()
    published = bundled["sets"]
    sets: list[ValidationSetOut] = []
    for data, check in zip(published, check_sets(published, load_model, load_hardware, fit), strict=True):
        rows = practice_rows(data, load_model, load_hardware(data["hardware"])) if practice else None
        sets.append(validation_set_document(check, fit, rows))
    if not as_json:
        console.print(summary_table(sets, console.width))
        console.print()
        for doc in sets:
            console.print(render_validation_set(doc))
    scaling = [
        scaling_document(strong_scaling(s, published, load_model, load_hardware(s["hardware"])))
        for s in bundled.get("statements", ())
    ]
    if not as_json:
        for statement in scaling:
            console.print(scaling_table(statement))
    memory_out = None
    if memory:
        data = load_published_memory()
        memory_out = memory_document(validate_memory(data, load_model, load_hardware(data["hardware"])))
        if not as_json:
            console.print(memory_tables(memory_out))
    recent_out = None
    if recent:
        collection = load_recent_runs()
        predicted = predict_all(collection, load_model, load_hardware)
        recent_out = recent_document(
            collection, leave_one_set_out(collection, predicted, load_model, load_hardware)
        )
        if not as_json:
            console.print(recent_tables(recent_out))
    if as_json:
        document = ValidateDocument(sets=sets, scaling=scaling, memory=memory_out, recent=recent_out)
        print(json_text(document.model_dump(mode="json")))
