"""The record every pass-time function returns (`PassTimes`: seconds of F, I and W for one micro-batch, each
itemised), and the hardware rates they price work at (`rates`, `linear_rate`): a GPU's peaks at the hardware
profile's fitted efficiencies. pplan.cost.passtime builds a layer's and the model's ends' passes from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

from pplan.plan.shape import LayerSetting
from pplan.profiles.hardware_spec import HardwareSpec


@dataclass(frozen=True, slots=True)
class PassTimes:
    """Seconds of F, I and W for one micro-batch, each itemised as (name, seconds)."""

    f: tuple[tuple[str, float], ...]
    i: tuple[tuple[str, float], ...]
    w: tuple[tuple[str, float], ...]
    f_s: float = field(init=False, compare=False)
    """The sum of `f` (computed once: the search reads pass totals far more often than it builds them)."""
    i_s: float = field(init=False, compare=False)
    w_s: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        seconds = itemgetter(1)  # each item's seconds, summed in order
        object.__setattr__(self, "f_s", sum(map(seconds, self.f)))
        object.__setattr__(self, "i_s", sum(map(seconds, self.i)))
        object.__setattr__(self, "w_s", sum(map(seconds, self.w)))

    def scaled(self, k: float) -> PassTimes:
        def sc(items: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
            return tuple((n, x * k) for n, x in items)

        return PassTimes(sc(self.f), sc(self.i), sc(self.w))

    def plus(self, other: PassTimes) -> PassTimes:
        def add(
            a: tuple[tuple[str, float], ...], b: tuple[tuple[str, float], ...]
        ) -> tuple[tuple[str, float], ...]:
            out: dict[str, float] = {}
            for n, x in (*a, *b):
                out[n] = out.get(n, 0.0) + x
            return tuple(out.items())

        return PassTimes(add(self.f, other.f), add(self.i, other.i), add(self.w, other.w))


ZERO = PassTimes((), (), ())


def rates(hw: HardwareSpec) -> tuple[float, float, float, float]:
    """FLOP/s of BF16 GEMMs and of the attention core, HBM bytes/s, and seconds of one kernel's overhead: the
    hardware profile's peaks at its fitted efficiencies."""
    peak = hw.gpu.peak_bf16_tflops * 1e12
    eff = hw.efficiency
    return (
        peak * eff.matmul,
        peak * eff.attention_fraction,
        hw.gpu.hbm_bandwidth_gb_per_s * 1e9 * eff.hbm,
        eff.kernel_overhead_us * 1e-6,
    )


def linear_rate(hw: HardwareSpec, plan: LayerSetting) -> float:
    """FLOP/s of the layers' Linear GEMMs: the BF16 rate, or under FP8 the FP8 peak × `efficiency.fp8_matmul`
    (pplan.model.precision)."""
    if plan.precision == "bf16" or hw.gpu.peak_fp8_tflops is None:
        return hw.gpu.peak_bf16_tflops * 1e12 * hw.efficiency.matmul
    return hw.gpu.peak_fp8_tflops * 1e12 * hw.efficiency.fp8_matmul_fraction
