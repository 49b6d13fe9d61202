"""Rich renderables for `pplan profiles`: a table of all profiles of a kind, and every field of one profile.

Takes validated specs and returns renderables; reads no files and prints nothing. Memory is shown in GB (10^9
bytes), as every other command shows it, from the bytes the spec converts its GiB inputs to (`GpuSpec.hbm_bytes`,
`HardwareSpec.hbm_after_fixed_bytes`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel
from rich import box
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderResult
from rich.measure import Measurement
from rich.table import Table

from pplan.profiles.fields import GB
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec

_NONE = "—"
_SpecT = TypeVar("_SpecT", HardwareSpec, ModelSpec)


@dataclass(frozen=True)
class _Column(Generic[_SpecT]):
    header: str
    cell: Callable[[_SpecT], str]
    numeric: bool = True


_HARDWARE_COLUMNS: dict[str, _Column[HardwareSpec]] = {
    "name": _Column("name", lambda s: s.name, numeric=False),
    "gpu": _Column("GPU", lambda s: s.gpu.name, numeric=False),
    "bf16": _Column("BF16\nTFLOP/s", lambda s: _number(s.gpu.peak_bf16_tflops)),
    "hbm": _Column("HBM\nGB", lambda s: _gb(s.gpu.hbm_bytes)),
    "usable": _Column("usable\nGB", lambda s: _gb(s.hbm_after_fixed_bytes)),
    "gpus": _Column("GPUs/\nnode", lambda s: str(s.gpus_per_node)),
    "nvlink": _Column("NVLink\nGB/s", lambda s: _number(s.intra_node.bandwidth_gb_per_s)),
    "ib": _Column("IB\nGB/s", lambda s: _number(s.inter_node.bandwidth_gb_per_s)),
    "description": _Column("description", lambda s: s.description, numeric=False),
}

_MODEL_COLUMNS: dict[str, _Column[ModelSpec]] = {
    "name": _Column("name", lambda s: s.name, numeric=False),
    "layers": _Column("L", lambda s: str(s.num_layers)),
    "hidden": _Column("h", lambda s: str(s.hidden_size)),
    "heads": _Column("heads/KV", lambda s: f"{s.num_attention_heads}/{s.kv_heads}"),
    "ffn": _Column("FFN", lambda s: str(s.ffn_hidden_size)),
    "mlp": _Column("MLP", lambda s: s.mlp, numeric=False),
    "experts": _Column("experts", lambda s: _experts(s), numeric=False),
    "vocab": _Column("vocab", lambda s: str(s.vocab_size)),
    "seq": _Column("seq", lambda s: str(s.seq_len)),
    "description": _Column("description", lambda s: s.description, numeric=False),
}


def _experts(model: ModelSpec) -> str:
    """`top-k of E × f_e` for a routed model (with `+shared` and the dense layers), `-` for a dense one."""
    moe = model.moe
    if moe is None:
        return "-"
    text = f"{moe.top_k} of {moe.num_experts}×{moe.expert_ffn_hidden_size}"
    if moe.shared_expert_ffn_hidden_size:
        text += f" +{moe.shared_expert_ffn_hidden_size}"
    return text


def hardware_table(specs: Sequence[HardwareSpec], title: str = "Hardware profiles") -> ConsoleRenderable:
    """One row per hardware profile: GPU, peak, HBM (label and usable), node size, link bandwidths."""
    caption = (
        "Memory in GB (10⁹ bytes; the profiles' hbm_gib is GiB). Bandwidths: nominal, per GPU and direction. "
        "Usable = HBM − CUDA context − label gap, before a plan's NCCL buffers (memory.nccl_per_communicator_mib per "
        "communicator it opens)."
    )
    return _FitTable(title, _HARDWARE_COLUMNS, specs, droppable=("description", "gpu"), caption=caption)


def models_table(specs: Sequence[ModelSpec], title: str = "Model profiles") -> ConsoleRenderable:
    """One row per model: layers, width, heads (query/KV), MLP width and kind, routed experts, vocabulary,
    sequence length."""
    return _FitTable(title, _MODEL_COLUMNS, specs, droppable=("description", "experts"))


class _FitTable(Generic[_SpecT]):
    """A table of specs that leaves out its least important columns when the terminal is too narrow."""

    def __init__(
        self,
        title: str,
        columns: dict[str, _Column[_SpecT]],
        specs: Sequence[_SpecT],
        droppable: Sequence[str],
        caption: str | None = None,
    ) -> None:
        self.title = title
        self.columns: dict[str, _Column[_SpecT]] = columns
        self.specs: Sequence[_SpecT] = specs
        self.droppable = droppable
        self.caption = caption

    def table(self, omit: Collection[str] = ()) -> Table:
        table = Table(title=self.title, caption=self.caption, box=box.SIMPLE_HEAD, title_justify="left")
        kept = [column for key, column in self.columns.items() if key not in omit]
        for i, column in enumerate(kept):
            style = "bold cyan" if i == 0 else None
            table.add_column(column.header, justify="right" if column.numeric else "left", style=style)
        for spec in self.specs:
            table.add_row(*(column.cell(spec) for column in kept))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        omit: list[str] = []
        table = self.table(omit)
        unbounded = options.update_width(10**6)
        for key in self.droppable:
            if Measurement.get(console, unbounded, table).maximum <= options.max_width:
                break
            omit.append(key)
            table = self.table(omit)
        yield table


def profile_detail(spec: HardwareSpec | ModelSpec) -> Table:
    """Every field of one profile, by its dotted name, with its value and what it means."""
    kind = "Hardware" if isinstance(spec, HardwareSpec) else "Model"
    table = Table(title=f"{kind} profile {spec.name}", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("field", style="cyan", no_wrap=True)
    table.add_column("value")
    table.add_column("meaning", ratio=1)
    for field, value, meaning in _rows(spec, prefix=""):
        table.add_row(field, value, meaning)
    if isinstance(spec, HardwareSpec):
        table.add_row(
            "HBM (derived)",
            f"{spec.gpu.hbm_bytes / GB:.2f}",
            "GB (10⁹ bytes) per GPU: gpu.hbm_gib in decimal units, as every other command shows memory.",
        )
        table.add_row(
            "usable HBM (derived)",
            f"{spec.hbm_after_fixed_bytes / GB:.2f}",
            "GB (10⁹ bytes) per GPU left for weights, states and activations: HBM − context − label gap, before a "
            "plan's NCCL buffers (explain shows them per plan).",
        )
        table.add_row("calibration status (derived)", *_calibration_status(spec))
    return table


def _calibration_status(spec: HardwareSpec) -> tuple[str, str]:
    """Whether the efficiencies are calibrated, and why (`efficiency.calibrated` after the load-time check)."""
    if spec.efficiency.calibrated:
        return (
            "calibrated",
            "The efficiencies were fitted with exactly this profile's figures (efficiency.fingerprint).",
        )
    if spec.fitted_to_other_figures:
        return (
            "not calibrated",
            "The efficiencies were fitted with other GPU, link or efficiency figures than this profile's (a copied "
            "or edited profile, or figures taken with `from`), so the fingerprint of the fit does not match.",
        )
    if spec.efficiency.fingerprint is not None:
        return (
            "not calibrated",
            "The profile marks its efficiencies as not calibrated (efficiency.calibrated).",
        )
    return (
        "not calibrated",
        "No fit is recorded for these efficiencies (no efficiency.fingerprint): they are assumed.",
    )


def _rows(model: BaseModel, prefix: str) -> Iterator[tuple[str, str, str]]:
    """(dotted field name, value, docstring) for every field, descending into nested sections."""
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        dotted = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            section = info.description or (type(value).__doc__ or "").strip()
            yield f"[bold]{dotted}[/bold]", "", section
            yield from _rows(value, prefix=f"{dotted}.")
        else:
            yield dotted, _value(value), info.description or ""


def _value(value: object) -> str:
    if value is None:
        return _NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _number(value)
    return str(value)


def _gb(n_bytes: int) -> str:
    """Bytes as GB (10^9 bytes), one decimal."""
    return f"{n_bytes / GB:.1f}"


def _number(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e6 else f"{value:,.0f}"
