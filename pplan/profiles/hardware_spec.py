"""A hardware profile, validated (`HardwareSpec`): a node of identical GPUs (`GpuSpec`), the memory a job cannot
use (`MemoryReserveSpec`), the links inside a node, between nodes and to the host (`LinkSpec`), the efficiencies
(`EfficiencySpec`), oversubscription above a pod (`PodSpec`), power (`PowerSpec`) and the calibrated error band
and envelope (`CalibrationSpec`).

Every figure must also be physically plausible (pplan.profiles.plausible). And `efficiency.calibrated` holds only
where the profile's figures are those its efficiencies were fitted with (`efficiency.fingerprint`,
`calibration_fingerprint`): a copied profile with other figures, or a flag copied without a fit, loads as not
calibrated.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from pplan.errors import ConfigError
from pplan.profiles.fields import (
    GB,
    GIB,
    MAX_GPUS_PER_NODE,
    MAX_HBM_GIB,
    MAX_SEQ,
    MIB,
    Fraction,
    FreeText,
    FrozenSpec,
    GbPerS,
    LatencyUs,
    Name,
    SpecRuleError,
    Tflops,
)
from pplan.profiles.plausible import implausible_figures


class GpuSpec(FrozenSpec):
    """One accelerator: datasheet peaks and capacity (never efficiencies)."""

    name: Name
    """Marketing name, e.g. `H100 SXM5 80GB`."""
    peak_bf16_tflops: Tflops
    """Dense BF16 tensor-core peak, TFLOP/s (datasheet, no sparsity; 0.001 to 10^7; plausible: 10 to 20,000)."""
    peak_fp8_tflops: Tflops | None = None
    """Dense FP8 peak, TFLOP/s (0.001 to 10^7; plausible: 20 to 50,000), where the GPU has it."""
    block_scaled_fp8: bool = False
    """Tensor cores that take block-scaled FP8 (MXFP8: one E8M0 scale per 32 elements; Blackwell)."""
    hbm_gib: float = Field(gt=0, le=MAX_HBM_GIB, allow_inf_nan=False)
    """HBM capacity in GiB (0 < x ≤ 10^5; plausible: 4 to 4,096; NVIDIA's "80 GB" parts carry 80 GiB of HBM
    stacks)."""
    hbm_bandwidth_gb_per_s: GbPerS
    """HBM bandwidth, GB/s (0.001 to 10^7; plausible: 100 to 100,000)."""
    sms: int | None = Field(default=None, gt=0, le=100_000)
    """Streaming multiprocessors (datasheet or architecture whitepaper), where known: what a communication kernel
    that runs on some of them takes from a GEMM beside it (pplan.cost.passtime, `tp_comm_overlap`); plausible: 4 to
    4,096."""

    @property
    def hbm_bytes(self) -> int:
        return int(self.hbm_gib * GIB)


RETIRED_MEMORY_FIELDS = {
    "reserve_gib": "memory.context_gib, memory.label_gap_gib and memory.nccl_per_communicator_mib",
    "fragmentation_fraction": "memory.dynamic_fragmentation_fraction (a fraction of the dynamic bytes)",
}
"""Fields of the one-number reserve that named parts replaced, and what replaces each (pplan.cost.usable)."""


class MemoryReserveSpec(FrozenSpec):
    """What of the HBM a training job cannot use, as named parts: a plan's usable bytes are HBM − context − label
    gap − NCCL buffers of the communicators it opens (pplan.cost.usable); fragmentation adds to each rank's need."""

    context_gib: float = Field(ge=0, le=MAX_HBM_GIB, allow_inf_nan=False)
    """CUDA context and framework workspaces (cuBLAS, cuDNN, PyTorch) per GPU, GiB (0 to 10^5; plausible: 0 to 16):
    fixed per GPU."""
    label_gap_gib: float = Field(ge=0, le=MAX_HBM_GIB, allow_inf_nan=False)
    """The label capacity (gpu.hbm_gib) minus the total the driver reports to allocations, GiB (0 to 10^5;
    plausible: 0 to 32)."""
    nccl_per_communicator_mib: float = Field(ge=0, le=MAX_HBM_GIB * 1024, allow_inf_nan=False)
    """NCCL buffers one communicator holds on one GPU, MiB (0 to 10^5 GiB; plausible: 0, or 1 to 16,384); times the
    plan's communicators."""
    dynamic_fragmentation_fraction: float = Field(ge=0, lt=1, allow_inf_nan=False)
    """Caching-allocator fragmentation as a fraction of the dynamic bytes (activations in flight, extra buffers,
    the recompute transient, ZeRO-3's gathered weights, the offload buffer; 0 ≤ x < 1); added to each rank's
    need."""

    @model_validator(mode="before")
    @classmethod
    def _refuse_retired_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in RETIRED_MEMORY_FIELDS.items():
                if old in data:
                    raise SpecRuleError(
                        old,
                        f"{old} is no longer read: usable memory is HBM minus named parts",
                        f"replace memory.{old} with {new}",
                    )
        return data

    @property
    def fixed_bytes(self) -> int:
        """What every GPU loses whatever the plan: the context and the label gap."""
        return int((self.context_gib + self.label_gap_gib) * GIB)

    @property
    def nccl_per_communicator_bytes(self) -> int:
        return int(self.nccl_per_communicator_mib * MIB)


class LinkSpec(FrozenSpec):
    """One link tier in the alpha-beta model: time = latency + bytes / (bandwidth × efficiency)."""

    name: Name
    """E.g. `NVLink 4 (NVSwitch)`, `InfiniBand NDR 400 Gb/s`."""
    bandwidth_gb_per_s: GbPerS
    """Nominal bandwidth per GPU per direction, GB/s (0.001 to 10^7; plausible, by tier: intra-node 5 to 10,000,
    inter-node 1 to 300, host 4 to 5,000; `PLAUSIBLE`)."""
    efficiency: Fraction
    """Achievable fraction of the nominal bandwidth (10^-9 to 1; measured, see the profile's comments)."""
    latency_us: LatencyUs
    """One-way latency per message, µs (0 to 10^6, i.e. at most 1 s; plausible: 0, or 0.1 to 1,000)."""

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gb_per_s * GB

    @property
    def achievable_bytes_per_s(self) -> float:
        return self.bandwidth_gb_per_s * GB * self.efficiency

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6


class EfficiencySpec(FrozenSpec):
    """Achievable fractions of the datasheet peaks, and fixed costs, that turn FLOPs and bytes into seconds."""

    matmul: Fraction
    """Fraction of the BF16 peak that large GEMMs reach (10^-9 to 1; fitted by `pplan validate`)."""
    attention: Fraction | None = None
    """Fraction of peak the flash-attention core reaches (10^-9 to 1); defaults to 0.8 × matmul (assumed)."""
    attention_cudnn: Fraction | None = None
    """Fraction of the BF16 peak cuDNN's fused attention core reaches (10^-9 to 1), for stacks that run it
    (`pplan.profiles.stacks.Stack.attention_kernel`); None: no rate for this GPU, and those stacks are priced at the
    flash-attention rate."""
    attention_cudnn_fixed_us: LatencyUs = 0.0
    """cuDNN's fused attention: a fixed time per forward core, µs (the backward pays 2.5 times it)."""
    grouped_gemm: Fraction | None = None
    """Fraction of peak the routed experts' grouped GEMMs reach (10^-9 to 1); defaults to matmul (assumed)."""
    fp8_matmul: Fraction | None = None
    """Fraction of the FP8 peak that FP8 GEMMs reach (10^-9 to 1); defaults to matmul (assumed, unfitted)."""
    hbm: Fraction = 0.8
    """Fraction of HBM bandwidth that memory-bound kernels (norms, activations, optimizer) reach (10^-9 to 1)."""
    loss_hbm: Fraction | None = None
    """Fraction of HBM bandwidth the cross-entropy's FP32 kernels over the logits reach (10^-9 to 1): the cast, the
    row max and sum over the vocabulary, exp and the normalisation forward, the scaling and cast backward
    (`pplan.cost.passtime.LOSS_BYTES`); defaults to `hbm`."""
    kernel_overhead_us: LatencyUs = 4.0
    """Fixed cost per kernel (launch, ramp and tail), µs (0 to 10^6; plausible: 0, or 0.1 to 1,000); what makes
    small GEMMs run below peak."""
    calibrated: bool = False
    """True where these figures were fitted to measured runs on this hardware; `explain` says so. Honoured only
    where `fingerprint` is that of the profile's own figures: a loaded profile whose GPU, link or efficiency figures
    differ from those of the fit (a copied profile, an edited figure, a flag with no fit) reads false."""
    fingerprint: Name | None = Field(default=None, max_length=64)
    """The figures the efficiencies were fitted with, hashed (`pplan.profiles.specs.calibration_fingerprint`: the
    GPU's peaks, HBM bandwidth and SMs, the node size, both links and every efficiency figure); written with the fit.
    None: no fit recorded, and the profile is not calibrated."""

    @property
    def loss_hbm_fraction(self) -> float:
        return self.loss_hbm if self.loss_hbm is not None else self.hbm

    @property
    def attention_fraction(self) -> float:
        return self.attention if self.attention is not None else 0.8 * self.matmul

    @property
    def fp8_matmul_fraction(self) -> float:
        return self.fp8_matmul if self.fp8_matmul is not None else self.matmul

    @property
    def grouped_gemm_fraction(self) -> float:
        return self.grouped_gemm if self.grouped_gemm is not None else self.matmul


class PodSpec(FrozenSpec):
    """Where the network stops being full-bisection: groups of GPUs (pods) inside which the fabric is non-blocking,
    and the oversubscription of the links above them (Llama 3's clusters: 3,072-GPU pods with full bisection and
    1:7 oversubscription above, Dubey et al. 2024 §3.3.1)."""

    gpus: int = Field(gt=0, le=10**9)
    """GPUs per pod (a multiple of the node size)."""
    oversubscription: float = Field(ge=1, le=1000)
    """Down-link : up-link ratio above the pod; a collective whose group spans pods gets 1/this of the inter-node
    bandwidth."""


class PowerSpec(FrozenSpec):
    """What a node draws at full load, for energy estimates (`pplan size`): the GPUs' board power and the rest of
    the node (CPUs, memory, NICs, switches, fans), from the system's datasheet; facility overhead (PUE) is given
    per run."""

    gpu_watts: float = Field(gt=0, le=100_000)
    """One GPU's board power at full load (the datasheet's maximum TDP), W (plausible: 50 to 10,000)."""
    node_overhead_watts: float = Field(ge=0, le=10_000_000)
    """The node's maximum system power less its GPUs' board power, W (plausible: 0, or 50 to 10^6)."""


class UserFitSpec(FrozenSpec):
    """The user's own runs a profile's figures were fitted to (`[user_fit]`, written by `pplan calibrate` from their
    training logs): how many, and the spread of their step-time errors with the fitted figures. A plan on such a
    profile is judged by these runs (pplan.cost.uncertainty), not by the public ones."""

    runs: int = Field(gt=0, le=100_000)
    """The logs the figures were fitted to."""
    error_low: float = Field(gt=-1, le=1)
    """10th percentile of (predicted − measured) / measured over them, each log left out of the fit (in sample where
    a single log leaves none out)."""
    error_high: float = Field(gt=-1, le=10)
    """90th percentile of the same."""
    mape: float = Field(ge=0, le=10)
    """Mean absolute error of the same."""
    in_sample_mape: float = Field(ge=0, le=10)
    """Mean absolute error with every log in the fit."""
    left_out: bool
    """Whether the errors are leave-one-log-out (two logs or more) or in sample (one)."""


class CalibrationSpec(FrozenSpec):
    """How far the profile's fitted figures are known (`pplan validate --fit` derives every field from the bundled
    public runs on this GPU type): the spread of its errors when each set is left out of the fit, and the envelope
    of the runs it was fitted to. pplan.cost.uncertainty turns them into an interval on every predicted step."""

    runs: int = Field(gt=0, le=100_000)
    """End-to-end runs behind the errors."""
    error_low: float = Field(gt=-1, le=0)
    """10th percentile of (predicted − published) / published over those runs, each predicted with the efficiency
    fitted without its set (leave one set out)."""
    error_high: float = Field(ge=0, lt=10)
    """90th percentile of the same."""
    tp_max: int = Field(gt=0, le=10**9)
    """The largest tensor-parallel degree a calibration run used."""
    pp_max: int = Field(gt=0, le=10**9)
    """The largest pipeline-parallel degree a calibration run used."""
    cp_max: int = Field(gt=0, le=10**9)
    """The largest context-parallel degree a calibration run used."""
    zero_max: int = Field(ge=0, le=3)
    """The highest ZeRO stage a calibration run used."""
    params_min_b: float = Field(gt=0, le=1e6)
    """The smallest model a calibration run trained, billions of parameters."""
    params_max_b: float = Field(gt=0, le=1e6)
    """The largest model a calibration run trained, billions of parameters."""
    seq_len_min: int = Field(gt=0, le=MAX_SEQ)
    """The shortest sequence a calibration run used, tokens."""
    seq_len_max: int = Field(gt=0, le=MAX_SEQ)
    """The longest sequence a calibration run used, tokens."""
    gpus_max: int = Field(gt=0, le=10**9)
    """The most GPUs a calibration run used."""
    schedules: tuple[Name, ...] = Field(strict=False, max_length=64)
    """Schedule families the runs used (a TOML array)."""
    stacks: tuple[Name, ...] = Field(strict=False, max_length=64)
    """Software stacks the runs were made with (pplan.profiles.stacks)."""
    precisions: tuple[Name, ...] = Field(default=("bf16",), strict=False, max_length=64)
    """GEMM precisions the runs used (a TOML array; bf16, fp8, mxfp8)."""
    routed: bool = False
    """Whether a mixture-of-experts run is among them."""
    ep_max: int = Field(default=1, gt=0, le=10**9)
    """The largest expert-parallel degree a run used."""
    tp_comm_overlap: bool = False
    """Whether a run overlapped its tensor-parallel collectives with its GEMMs (`tp_comm_overlap`)."""


class HardwareSpec(FrozenSpec):
    """A cluster building block: a node of identical GPUs, the link inside it and the network between nodes."""

    name: Name
    """Short name, e.g. `h100-sxm-80gb`."""
    description: FreeText = ""
    """One line for `pplan profiles`."""
    gpus_per_node: int = Field(gt=0, le=MAX_GPUS_PER_NODE)
    """GPUs sharing the intra-node fabric (NVLink/NVSwitch; 1 to 1024)."""
    gpu: GpuSpec
    memory: MemoryReserveSpec
    intra_node: LinkSpec
    """GPU-to-GPU inside a node."""
    inter_node: LinkSpec
    """GPU-to-GPU across nodes (per GPU: one NIC per GPU on DGX nodes)."""
    efficiency: EfficiencySpec
    pod: PodSpec | None = None
    """Oversubscription above a pod (`[pod]`); None: the inter-node fabric is full-bisection at any size (DGX
    SuperPOD's rail-optimised fat tree)."""
    calibration: CalibrationSpec | None = None
    """The fitted figures' error spread and envelope (`[calibration]`); None where no public run on this GPU type
    was fitted, or where the efficiencies are not calibrated (their figures are not those of the fit), and pplan
    then says every prediction on it is extrapolated."""
    user_fit: UserFitSpec | None = None
    """The user's own runs the figures were fitted to (`[user_fit]`, `pplan calibrate`); None for a public profile."""
    power: PowerSpec | None = None
    """Full-load power per GPU and per node (`[power]`); None: no energy estimate (never guessed)."""
    price_usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=1_000_000)
    """A price per GPU-hour for cost estimates (`pplan size`; --price overrides it); None: no cost (never
    guessed: bundled profiles carry none)."""
    host_link: LinkSpec | None = None
    """GPU to host memory and back (the PCIe link to the CPU), per GPU per direction: what activation offload
    copies over. Every bundled profile states it; a profile without it loads, and a plan that offloads on it is
    refused naming this field (`require_host_link`): no default would be honest across hosts."""

    def require_host_link(self, flag: str = "--offload-modules") -> LinkSpec:
        """The host link, or a ConfigError on `flag` naming `host_link` when the profile has none (activation
        offload)."""
        if self.host_link is None:
            raise ConfigError(
                flag, f"hardware profile {self.name} has no [host_link] section (the GPU-to-host "
                "link activation offload copies over)",
                f"add [host_link] with name, bandwidth_gb_per_s, efficiency and latency_us, or drop {flag}",
            )  # fmt: skip
        return self.host_link

    @field_validator("efficiency")
    @classmethod
    def _honest_calibration(cls, efficiency: EfficiencySpec, info: ValidationInfo) -> EfficiencySpec:
        """`calibrated` only where the fit's fingerprint is that of this profile's figures (module docstring)."""
        if not efficiency.calibrated:
            return efficiency
        data = info.data
        if not all(key in data for key in ("gpus_per_node", "gpu", "intra_node", "inter_node")):
            return efficiency  # another field is refused: the profile does not load
        own = _fingerprint(
            data["gpus_per_node"], data["gpu"], data["intra_node"], data["inter_node"], efficiency
        )
        if efficiency.fingerprint == own:
            return efficiency
        return efficiency.model_copy(update={"calibrated": False})

    @field_validator("calibration")
    @classmethod
    def _calibration_of_a_fit(
        cls, calibration: CalibrationSpec | None, info: ValidationInfo
    ) -> CalibrationSpec | None:
        """No error band or envelope where the efficiencies are not calibrated: `[calibration]` describes how far the
        fitted figures are known, and a profile whose figures are not the fitted ones (a copy, an edit) has not
        earned it; pplan then says every prediction on it is extrapolated, as for any uncalibrated GPU."""
        efficiency = info.data.get("efficiency")
        if calibration is not None and isinstance(efficiency, EfficiencySpec) and not efficiency.calibrated:
            return None
        return calibration

    @model_validator(mode="after")
    def _check_usable_memory(self) -> HardwareSpec:
        if self.hbm_after_fixed_bytes <= 0:
            fixed = self.memory.context_gib + self.memory.label_gap_gib
            fix = "make memory.context_gib + memory.label_gap_gib less than gpu.hbm_gib"
            # a figure in the wrong unit (a context of 768 "GiB" that is MiB) is the likelier cause: say which
            slips = [
                f"{problem.field}: {problem.fix}"
                for problem in implausible_figures(self)
                if problem.field in ("gpu.hbm_gib", "memory.context_gib", "memory.label_gap_gib")
                and problem.fix.startswith("a value in")
            ]
            raise SpecRuleError(
                "memory.context_gib",
                f"the context and label gap ({fixed:g} GiB) leave no usable HBM of gpu.hbm_gib = "
                f"{self.gpu.hbm_gib:g}",
                f"{fix} ({slips[0]})" if slips else fix,
            )
        return self

    @model_validator(mode="after")
    def _check_plausible(self) -> HardwareSpec:
        # After the usable-memory check: a context larger than the HBM is named as such, not as implausible.
        problems = implausible_figures(self)
        if problems:
            first, *others = problems
            also = f" (also implausible: {', '.join(p.field for p in others)})" if others else ""
            raise SpecRuleError(first.field, first.message + also, first.fix)
        return self

    def with_efficiency(self, **changes: float | bool | None) -> HardwareSpec:
        """This profile with some `efficiency` figures replaced (a fit, a sensitivity probe); nothing else moves.

        `calibrated=True` says the caller has just fitted the figures to this hardware (`pplan bench --calibrate`):
        the new figures' fingerprint is recorded with them, so the profile it writes loads as calibrated."""
        efficiency = self.efficiency.model_copy(update=changes)
        if changes.get("calibrated") is True:
            fingerprint = _fingerprint(
                self.gpus_per_node, self.gpu, self.intra_node, self.inter_node, efficiency
            )
            efficiency = efficiency.model_copy(update={"fingerprint": fingerprint})
        return self.model_copy(update={"efficiency": efficiency})

    @property
    def fitted_to_other_figures(self) -> bool:
        """The efficiencies carry a fit's fingerprint, but of figures other than this profile's (a copied or edited
        profile): why it is not calibrated."""
        fingerprint = self.efficiency.fingerprint
        return fingerprint is not None and fingerprint != calibration_fingerprint(self)

    @property
    def hbm_after_fixed_bytes(self) -> int:
        """HBM minus the parts every GPU loses whatever the plan (context, label gap); a plan's usable bytes
        also lose its NCCL buffers (pplan.cost.usable)."""
        return self.gpu.hbm_bytes - self.memory.fixed_bytes


# --- calibration: which figures a fit was made with ------------------------------------------------------

FINGERPRINTED_GPU = (
    "peak_bf16_tflops",
    "peak_fp8_tflops",
    "block_scaled_fp8",
    "hbm_bandwidth_gb_per_s",
    "sms",
)
"""The GPU figures a fitted step time depends on (capacity and memory reserves set what fits, not how fast)."""
FINGERPRINTED_LINK = ("bandwidth_gb_per_s", "efficiency", "latency_us")
"""The figures of the intra- and inter-node links that the fitted runs' collectives crossed. The host link, a
`[pod]` and the power and price sections are left out: no calibration run offloaded or crossed an oversubscribed
pod (their costs are modelled, never fitted), and neither watts nor dollars enter a step time."""
_NOT_FINGERPRINTED = {"calibrated", "fingerprint"}


def calibration_fingerprint(hardware: HardwareSpec) -> str:
    """The fingerprint `efficiency.fingerprint` must hold for `hardware` to be calibrated: 16 hex digits of the
    SHA-256 of the figures a fit is made with (`FINGERPRINTED_GPU`, `FINGERPRINTED_LINK`, the node size and every
    efficiency figure but `calibrated` and `fingerprint` itself), so changing any of them, or copying the
    efficiencies to another GPU, leaves the fingerprint behind. A fit stamps it (`HardwareSpec.with_efficiency`);
    for a profile re-fitted by hand, the value to write is `calibration_fingerprint(load_hardware(PATH))`."""
    return _fingerprint(
        hardware.gpus_per_node, hardware.gpu, hardware.intra_node, hardware.inter_node, hardware.efficiency
    )


def _fingerprint(
    gpus_per_node: int, gpu: GpuSpec, intra: LinkSpec, inter: LinkSpec, efficiency: EfficiencySpec
) -> str:
    figures: dict[str, object] = {"gpus_per_node": gpus_per_node}
    figures.update({f"gpu.{name}": getattr(gpu, name) for name in FINGERPRINTED_GPU})
    for tier, link in (("intra_node", intra), ("inter_node", inter)):
        figures.update({f"{tier}.{name}": getattr(link, name) for name in FINGERPRINTED_LINK})
    figures.update(
        {
            f"efficiency.{name}": getattr(efficiency, name)
            for name in type(efficiency).model_fields
            if name not in _NOT_FINGERPRINTED
        }
    )
    # None (a figure not stated) is left out, so a new optional figure leaves existing fingerprints as they are.
    text = ";".join(
        f"{key}={_canonical(value)}" for key, value in sorted(figures.items()) if value is not None
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _canonical(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value))  # 3350 and 3350.0 are one figure
    return str(value)
