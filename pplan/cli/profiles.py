"""`pplan profiles`: list the bundled hardware and model profiles, or show one (as a table or as JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from pplan.cli.app import TableOrJson, app, asks_json, console, format_option, json_alias, json_text
from pplan.errors import ProfileError
from pplan.profiles.kinds import PROFILE_KINDS, ProfileKind

if TYPE_CHECKING:
    from pplan.profiles.hardware_spec import HardwareSpec
    from pplan.profiles.model_spec import ModelSpec


@app.command()
def profiles(
    kind: Annotated[
        ProfileKind | None,
        typer.Argument(help="`hardware` or `models`; both kinds when omitted.", show_default=False),
    ] = None,
    name: Annotated[
        str | None,
        typer.Argument(help="A bundled profile name or a path to a profile file.", show_default=False),
    ] = None,
    output: Annotated[TableOrJson, format_option("validated profile(s), every field", None)] = "table",
    as_json: Annotated[bool, json_alias(None)] = False,
    source: Annotated[
        bool, typer.Option("--source", help="Print the profile file as written (needs KIND and NAME).")
    ] = False,
) -> None:
    """List the bundled hardware and model profiles, or show every field of one."""
    as_json = asks_json(output, as_json)
    from pplan.profiles.catalog import (  # the core loads only when a command runs
        list_profiles,
        profile_source,
    )
    from pplan.profiles.hardware_spec import HardwareSpec
    from pplan.profiles.model_spec import ModelSpec
    from pplan.render.profiles import hardware_table, models_table, profile_detail

    kinds = PROFILE_KINDS if kind is None else (kind,)
    if name is not None:
        one = kinds[0]
        if source:
            typer.echo(profile_source(one, name), nl=False)
            return
        spec = _load(one, name)
        if as_json:
            _print_json(spec.model_dump(mode="json"))
        else:
            console.print(profile_detail(spec))
        return
    if source:
        raise ProfileError(
            "--source", "needs one profile", "give KIND and NAME, e.g. `pplan profiles models NAME`"
        )

    listed = {k: [_load(k, entry.name) for entry in list_profiles(k)] for k in kinds}
    if as_json:
        data = {k: [spec.model_dump(mode="json") for spec in specs] for k, specs in listed.items()}
        _print_json(data if kind is None else data[kinds[0]])
        return
    for k, specs in listed.items():
        if k == "hardware":
            console.print(hardware_table([s for s in specs if isinstance(s, HardwareSpec)]))
        else:
            console.print(models_table([s for s in specs if isinstance(s, ModelSpec)]))


def _load(kind: ProfileKind, ref: str) -> HardwareSpec | ModelSpec:
    from pplan.profiles.catalog import load_hardware, load_model

    return load_hardware(ref) if kind == "hardware" else load_model(ref)


def _print_json(data: Any) -> None:
    typer.echo(json_text(data, ensure_ascii=False))
