"""`pplan validate`: predicted against published step time for every bundled run, with the error and the MAPE;
with --memory, also pplan's memory model against published per-GPU memory.

Predicts each bundled set (`pplan.validation`), builds its `pplan.validate/2` block (`pplan.documents.validate`)
and prints it as tables (`pplan.render.validate`) or, with --json, the whole document. --memory adds to the
step-time sets rather than replacing them, as --practice does: the terminal shows what the JSON document holds.
"""

from __future__ import annotations

from typing import Annotated

import typer

from pplan.cli.app import app, console, json_text
from pplan.documents.validate import (
    ValidateDocument,
    ValidationSetOut,
    memory_document,
    validation_set_document,
)
from pplan.profiles.catalog import load_hardware, load_model, load_published_memory, load_published_runs
from pplan.render.validate import memory_tables, render_validation_set
from pplan.validation.memory import validate_memory
from pplan.validation.practice import practice_rows
from pplan.validation.published import fit_matmul_to_published, validate_set


@app.command()
def validate(
    fit: Annotated[
        bool, typer.Option("--fit", help="Re-fit each GPU type's GEMM efficiency to its runs.")
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
    as_json: Annotated[bool, typer.Option("--json", help="Emit the pplan.validate/2 JSON document.")] = False,
) -> None:
    """Predict every bundled published run and compare with its published step time."""
    sets: list[ValidationSetOut] = []
    for data in load_published_runs()["sets"]:
        hardware = load_hardware(data["hardware"])
        if fit:
            matmul, result = fit_matmul_to_published(data, load_model, hardware)
        else:
            matmul, result = hardware.efficiency.matmul, validate_set(data, load_model, hardware)
        rows = practice_rows(data, load_model, hardware) if practice else None
        doc = validation_set_document(result, matmul, fit, rows)
        sets.append(doc)
        if not as_json:
            console.print(render_validation_set(doc))
    memory_out = None
    if memory:
        data = load_published_memory()
        memory_out = memory_document(validate_memory(data, load_model, load_hardware(data["hardware"])))
        if not as_json:
            console.print(memory_tables(memory_out))
    if as_json:
        print(json_text(ValidateDocument(sets=sets, memory=memory_out).model_dump(mode="json")))
