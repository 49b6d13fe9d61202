"""Whether a hardware profile's figures are physically plausible (`PLAUSIBLE`: a range per field, with the reason
for each bound): a value written in the wrong unit (HBM bandwidth in TB/s, a NIC in Gb/s) is refused naming the
likely unit and the value to write (`implausible_figures`, run by `HardwareSpec`'s validation), rather than
planned with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pplan.profiles.problems import SpecProblem

if TYPE_CHECKING:
    from pplan.profiles.hardware_spec import HardwareSpec


@dataclass(frozen=True)
class UnitSlip:
    """A likely wrong unit: a figure written in `unit` is `factor` times the value the field's own unit wants."""

    unit: str
    factor: float


_TB_PER_S = UnitSlip("TB/s", 1e3)
_MB_PER_S = UnitSlip("MB/s", 1e-3)
_GBIT_PER_S = UnitSlip("Gb/s", 1 / 8)
_PFLOPS = UnitSlip("PFLOP/s", 1e3)
_GFLOPS = UnitSlip("GFLOP/s", 1e-3)
_MIB_FOR_GIB = UnitSlip("MiB", 1 / 1024)
_TB_FOR_GIB = UnitSlip("TB", 1e3)  # NVIDIA's "GB" labels are GiB of stacks: "0.141 TB" would be 141
_GIB_FOR_MIB = UnitSlip("GiB", 1024)
_KIB_FOR_MIB = UnitSlip("KiB", 1 / 1024)
_NS = UnitSlip("ns", 1e-3)
_MS = UnitSlip("ms", 1e3)
_S = UnitSlip("s", 1e6)
_KW = UnitSlip("kW", 1e3)


@dataclass(frozen=True)
class Plausible:
    """The physical range of one hardware figure, inclusive, in the field's unit; `zero`: 0 also passes (the
    figure switched off: no latency, no overhead). Wider than any bundled profile, so that GPUs a few generations
    on still pass, and narrow enough that a figure written in a unit `slips` names (1,000× off, 1,024×, or 8× for
    bits against bytes) falls outside it."""

    low: float
    high: float
    unit: str
    what: str
    """Whose figures the range spans ("any GPU's memory bandwidth"), for the message."""
    slips: tuple[UnitSlip, ...] = ()
    zero: bool = False

    def problem(self, field: str, value: float) -> SpecProblem | None:
        """Why `value` is implausible, with the likely unit and the value to write; None if it is plausible."""
        if self.low <= value <= self.high or (self.zero and value == 0):
            return None
        where = "below" if value < self.low else "above"
        span = f"{_figure(self.low)}–{_figure(self.high)} {self.unit}"
        message = (
            f"{_figure(value)} {self.unit} is {where} {self.what} ({'0, or ' if self.zero else ''}{span})"
        )
        for slip in self.slips:
            fixed = value * slip.factor
            if self.low <= fixed <= self.high:
                return SpecProblem(field, message, f"a value in {slip.unit}? write {_plain(fixed)}")
        fix = f"give a number from {_figure(self.low)} to {_figure(self.high)} {self.unit}"
        return SpecProblem(field, message, fix + (" (or 0)" if self.zero else ""))


_LATENCY_SLIPS = (_NS, _MS, _S)
_LINK_SLIPS = (_TB_PER_S, _MB_PER_S, _GBIT_PER_S)

PLAUSIBLE: dict[str, Plausible] = {
    # A100's 312 is the lowest bundled peak, GB200's 2,500 the highest; 20,000 leaves 8× for generations to come.
    # Nothing under 10 TFLOP/s trains a transformer (a T4 has 65 FP16): a Blackwell's "2.5 PFLOP/s" written as
    # 2.5 falls below, its GFLOP/s above.
    "gpu.peak_bf16_tflops": Plausible(10, 20_000, "TFLOP/s", "any GPU's dense BF16 peak", (_PFLOPS, _GFLOPS)),
    # H100's 1,979 is the lowest bundled FP8 peak, GB200's 5,000 the highest: 50,000 is 10× that.
    "gpu.peak_fp8_tflops": Plausible(20, 50_000, "TFLOP/s", "any GPU's dense FP8 peak", (_PFLOPS, _GFLOPS)),
    # A100 40GB's 40 GiB is the least bundled, GB200's 186 the most; a GPU one trains on has 8 GiB or more, and a
    # 1 TB package (announced for 2027) fits under 4,096 four times. 80 GiB written in MiB (81,920) lies above.
    "gpu.hbm_gib": Plausible(4, 4_096, "GiB", "any GPU's memory", (_MIB_FOR_GIB, _TB_FOR_GIB)),
    # A100 40GB's 1,555 GB/s is the lowest bundled HBM, B200's 8,000 the highest: 100,000 is 12× that. The floor
    # of 100 admits GDDR cards (an L4's 300 GB/s) and still catches a TB/s figure (4.8 for 4,800).
    "gpu.hbm_bandwidth_gb_per_s": Plausible(
        100, 100_000, "GB/s", "any GPU's memory bandwidth", (_TB_PER_S, _MB_PER_S)
    ),
    # A100's 108 and H100's 132 SMs are the bundled ones, a B200 has 148; 4,096 is a wide margin for counts.
    "gpu.sms": Plausible(4, 4_096, "SMs", "any GPU's streaming multiprocessor count"),
    # Bundled: 0.75 GiB (a CUDA context and framework workspaces, under 1 GiB measured); 16 GiB is 20× that, and a
    # figure in MiB (768) lies above.
    "memory.context_gib": Plausible(0, 16, "GiB", "any CUDA context and workspaces", (_MIB_FOR_GIB,)),
    # Bundled: 0.41 to 2.0 GiB (about 1 % of the label); 32 GiB covers 1 % of a 3 TiB GPU; 850 MiB lies above.
    "memory.label_gap_gib": Plausible(0, 32, "GiB", "any label-to-usable gap", (_MIB_FOR_GIB,)),
    # Bundled: 294 MiB (16 channels × 2 connections × 9.2 MiB); 16,384 MiB (16 GiB) is 55× that; under 1 MiB is
    # less than one channel's LL buffer: a figure in GiB (0.29) or KiB (301,056).
    "memory.nccl_per_communicator_mib": Plausible(
        1, 16_384, "MiB", "any NCCL communicator's buffers", (_GIB_FOR_MIB, _KIB_FOR_MIB), zero=True
    ),
    # NVLink per GPU per direction: H800's 200 GB/s is the lowest bundled, NVLink 5's 900 the highest; 10,000 is
    # 11× that. 5 GB/s admits PCIe-only nodes (Gen3 x16: 16 GB/s); NVLink 5 written as "0.9 TB/s" falls below.
    "intra_node.bandwidth_gb_per_s": Plausible(5, 10_000, "GB/s", "any intra-node link", _LINK_SLIPS),
    # NICs per GPU per direction: HDR's 25 GB/s is the lowest bundled, NDR's 50 the highest; 300 (2.4 Tb/s) is 1.5×
    # the 1.6 Tb/s NICs announced next. NICs are sold in Gb/s: NDR written as 400 (or XDR as 800) lies above.
    # 1 GB/s is under 10 GbE.
    "inter_node.bandwidth_gb_per_s": Plausible(
        1, 300, "GB/s", "any network link per GPU", (_GBIT_PER_S, _TB_PER_S, _MB_PER_S)
    ),
    # PCIe Gen4 x16's 32 GB/s is the lowest bundled host link, NVLink-C2C's 225 the highest; 4 GB/s is a Gen3 x4.
    "host_link.bandwidth_gb_per_s": Plausible(4, 5_000, "GB/s", "any GPU-to-host link", _LINK_SLIPS),
    # Bundled: 3 to 10 µs per message. Under 0.1 µs is faster than any NIC or NVSwitch hop; over 1 ms is a WAN.
    # 0 switches latency off. A figure in ns (3,000) lies above, one in ms (0.003) or seconds (3e-6) below.
    "intra_node.latency_us": Plausible(0.1, 1_000, "µs", "any link's latency", _LATENCY_SLIPS, zero=True),
    "inter_node.latency_us": Plausible(0.1, 1_000, "µs", "any link's latency", _LATENCY_SLIPS, zero=True),
    "host_link.latency_us": Plausible(0.1, 1_000, "µs", "any link's latency", _LATENCY_SLIPS, zero=True),
    # Bundled: 4 µs per kernel and cuDNN attention's 41.4 µs per forward; a kernel launch takes a few µs, and
    # 1 ms per kernel would be a stalled GPU. A figure in ns (4,000) lies above.
    "efficiency.kernel_overhead_us": Plausible(
        0.1, 1_000, "µs", "any kernel's fixed cost", _LATENCY_SLIPS, zero=True
    ),
    "efficiency.attention_cudnn_fixed_us": Plausible(
        0.1, 1_000, "µs", "any kernel's fixed cost", _LATENCY_SLIPS, zero=True
    ),
    # A100's 400 W is the lowest bundled board power, B200's 1,000 W the highest; 10,000 W is 10× that, and 50 W is
    # under any datacenter card (an L4 draws 72). "0.7 kW" written as 0.7 falls below.
    "power.gpu_watts": Plausible(50, 10_000, "W", "any GPU's board power", (_KW,)),
    # Bundled: 3,300 to 6,300 W per node besides its GPUs; 1 MW covers a rack-scale node of hundreds of GPUs. 0
    # counts the GPUs only; under 50 W no node's CPUs, NICs and fans draw: a figure in kW (4.6) falls below.
    "power.node_overhead_watts": Plausible(
        50, 1_000_000, "W", "any node's power besides its GPUs", (_KW,), zero=True
    ),
}
"""Physical range of each hardware figure, by its dotted field; every bundled profile passes (tested), and the
comment above each says where its bounds come from. Fractions (efficiencies) need none: their hard range, 0 to 1,
already refuses a percentage."""

_GBIT_IN_NAME = re.compile(r"(\d+(?:\.\d+)?)\s*Gb/s")


def implausible_figures(hardware: HardwareSpec) -> list[SpecProblem]:
    """Every figure of `hardware` outside its `PLAUSIBLE` range, in the table's order; then every link whose
    bandwidth is the Gb/s figure of its own name (`InfiniBand NDR 400 Gb/s` at 400 GB/s: bits read as bytes)."""
    problems: list[SpecProblem] = []
    for field, bound in PLAUSIBLE.items():
        value: Any = hardware
        for part in field.split("."):
            value = getattr(value, part, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            problem = bound.problem(field, value)
            if problem is not None:
                problems.append(problem)
    flagged = {problem.field for problem in problems}
    for tier in ("intra_node", "inter_node", "host_link"):
        link = getattr(hardware, tier)
        field = f"{tier}.bandwidth_gb_per_s"
        named = _GBIT_IN_NAME.search(link.name) if link is not None else None
        if (
            link is None
            or named is None
            or field in flagged
            or float(named.group(1)) != link.bandwidth_gb_per_s
        ):
            continue
        problems.append(
            SpecProblem(
                field,
                f"{_figure(link.bandwidth_gb_per_s)} GB/s is the {named.group(0)} of the link's name "
                f"({link.name!r}) in bits, not bytes",
                f"a value in Gb/s? write {_plain(link.bandwidth_gb_per_s / 8)}",
            )
        )
    return problems


def _figure(value: float) -> str:
    """A figure for a message: 4.8; 100,000; 3e-06."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}"


def _plain(value: float) -> str:
    """A figure to write into a TOML file: 4800; 0.75; 56.25."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"
