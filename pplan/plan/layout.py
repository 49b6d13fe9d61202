"""How the model's layers are cut into chunks (virtual stages) and which rank holds which chunk.

A pipeline of p ranks with v chunks per rank cuts the L layers into S = p·v chunks, in model order. Chunk 0
also carries the embedding, chunk S−1 the final norm, output layer and loss. Placements:
- loop (1F1B, interleaved): chunk c on rank c mod p (Narayanan et al. 2021: with v = 2 and p = 8, rank 0 holds
  chunks 0 and 8, the 1st and 9th sixteenth of the layers);
- v (ZB-V, DualPipeV): rank r holds chunks r and 2p−1−r, so rank 0 holds both ends of the model;
- dual (DualPipe): the model is cut into p stages and rank r holds stage r and stage p−1−r (two copies).
Layers split evenly unless the first and/or last chunk is given its own count (Llama 3 removed one layer from
each end; Megatron's `--decoder-first/last-pipeline-num-layers`); the rest must then divide evenly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from pplan.errors import ConfigError
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules.registry import ScheduleFamily


@dataclass(frozen=True, slots=True)
class Chunk:
    """One virtual stage: `layers` consecutive transformer layers, maybe with the model's ends."""

    index: int
    layers: int
    has_embedding: bool
    has_output: bool
    dense_layers: int = 0
    """Of a routed model's `layers`, those with the dense MLP (0 for a dense model, whose layers are all of the
    one kind its spec describes; pplan.profiles.model_spec.ModelSpec.dense_layers_in)."""

    @property
    def routed_layers(self) -> int:
        """Layers of the model's own kind (routed in a routed model; all of them in a dense one)."""
        return self.layers - self.dense_layers


@dataclass(frozen=True, slots=True)
class Layout:
    """Chunks in model order and, per rank, the indices of the chunks it holds."""

    chunks: tuple[Chunk, ...]
    rank_chunks: tuple[tuple[int, ...], ...]
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    """The hash of the two fields, computed once: layouts key the cost caches."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.chunks, self.rank_chunks)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def num_ranks(self) -> int:
        return len(self.rank_chunks)

    def rank_layers(self, rank: int) -> int:
        return sum(self.chunks[c].layers for c in self.rank_chunks[rank])


def check_end_layers(num_layers: int, num_chunks: int, first: int | None, last: int | None) -> None:
    """Refuse first and last chunk counts that no split can honour: below 0, given for a one-chunk pipeline,
    over the model's layers, or leaving the chunks between the ends less than a layer each. The ConfigError
    names the end flag at fault, its limit and a fix (`--pp` only when the chunks outnumber the layers whatever
    the ends hold)."""
    given = [(flag, value) for flag, value in (("--first-stage-layers", first), ("--last-stage-layers", last))
             if value is not None]  # fmt: skip
    for flag, value in given:
        if value < 0:
            raise ConfigError(flag, f"must be ≥ 0, got {value}", "pass a layer count ≥ 0")
        if num_chunks == 1:
            raise ConfigError(flag, "sets the first or last chunk of a pipeline, but there is one chunk",
                              "drop it, or use --pp 2 or more")  # fmt: skip
    if not given:
        return
    middle = num_chunks - len(given)
    if middle > num_layers:
        raise ConfigError(
            "--pp",
            f"{num_chunks} pipeline chunks for {num_layers} layers leaves a chunk with no layer",
            f"use at most {num_layers + len(given)} chunks (pp × vp)",
        )
    most = num_layers - middle  # the most the ends may hold together: each chunk between them needs a layer
    needs = "" if not middle else "; the other chunk needs a layer" if middle == 1 else (
        f"; the other {middle} chunks need a layer each"
    )  # fmt: skip
    for flag, value in given:
        if value > most:
            end = flag.removeprefix("--").split("-")[0]
            over = (
                f"more than the model's {num_layers}" if value > num_layers else f"too many of {num_layers}"
            )
            raise ConfigError(
                flag, f"{value:,} layers on the {end} chunk is {over}{needs}", f"use {flag} {most} or fewer"
            )
    if len(given) == 2 and middle:
        (_, head), (_, tail) = given
        if head + tail > most:
            raise ConfigError(
                "--last-stage-layers" if tail > head else "--first-stage-layers",
                f"--first-stage-layers {head} and --last-stage-layers {tail} take {head + tail} of the "
                f"{num_layers} layers{needs}",
                f"make the two sum to {most} or fewer",
            )


def split_layers(num_layers: int, num_chunks: int, first: int | None, last: int | None) -> tuple[int, ...]:
    """Layers per chunk; raises ConfigError naming the option to change when they do not divide."""
    if num_chunks > num_layers and first is None and last is None:
        raise ConfigError(
            "--pp",
            f"{num_chunks} pipeline chunks for {num_layers} layers leaves a chunk with no layer",
            f"use at most {num_layers} chunks (pp × vp), or give the end chunks their own counts "
            "(--first-stage-layers / --last-stage-layers, 0 for a chunk of the embedding or the loss alone)",
        )
    check_end_layers(num_layers, num_chunks, first, last)
    if num_chunks == 1:
        return (num_layers,)
    head = [] if first is None else [first]
    tail = [] if last is None else [last]
    rest_layers = num_layers - sum(head) - sum(tail)
    rest_chunks = num_chunks - len(head) - len(tail)
    if rest_chunks == 0:
        if rest_layers != 0:
            raise ConfigError(
                "--first-stage-layers", f"first + last layers must sum to {num_layers}", "adjust the counts"
            )
        return (*head, *tail)
    # check_end_layers left each of the rest_chunks at least one layer
    if rest_layers % rest_chunks:
        if first is None and last is None:
            ends = uneven_ends(num_layers, num_chunks)
            example = f" (e.g. --first-stage-layers {ends[0]} --last-stage-layers {ends[1]})" if ends else ""
            fix = (
                f"choose pp × vp dividing {num_layers}, or set --first-stage-layers / --last-stage-layers "
                f"so the remaining layers divide evenly{example}"
            )
        else:
            fix = f"the other {rest_chunks} chunks must share {rest_layers} layers evenly; adjust the counts"
        raise ConfigError("--pp", f"{num_layers} layers do not split evenly into {num_chunks} chunks", fix)
    return (*head, *([rest_layers // rest_chunks] * rest_chunks), *tail)


def uneven_ends(num_layers: int, num_chunks: int) -> tuple[int, int] | None:
    """First and last chunks' layers (a, b) that let `num_layers` split over `num_chunks` ≥ 3 chunks with q layers
    in each middle one: a + b = num_layers − q·(num_chunks − 2), 1 ≤ b ≤ a ≤ q (the end chunks, which also hold the
    embedding and the output layer, no heavier than the others), the ends as close to q as that allows; None when
    no q does."""
    if num_chunks < 3:
        return None
    best: tuple[int, int, int] | None = None
    for q in range(1, num_layers // (num_chunks - 2) + 1):
        rest = num_layers - q * (num_chunks - 2)
        if 2 <= rest <= 2 * q:
            a, b = (rest + 1) // 2, rest // 2
            if best is None or q - b < best[0]:
                best = (q - b, a, b)
    return None if best is None else (best[1], best[2])


@lru_cache(maxsize=8192)
def make_layout(
    kind: ScheduleFamily,
    num_layers: int,
    p: int,
    v: int,
    first: int | None = None,
    last: int | None = None,
    model: ModelSpec | None = None,
) -> Layout:
    """The chunks and their placement on ranks for schedule `kind`; with a routed `model`, each chunk counts its
    dense-MLP layers."""
    num_chunks = p if kind.placement == "dual" else p * v
    per_chunk = split_layers(num_layers, num_chunks, first, last)
    starts = [sum(per_chunk[:i]) for i in range(num_chunks)]
    chunks = tuple(
        Chunk(
            i, n, has_embedding=i == 0, has_output=i == num_chunks - 1,
            dense_layers=model.dense_layers_in(starts[i], n) if model is not None else 0,
        )
        for i, n in enumerate(per_chunk)
    )  # fmt: skip
    if kind.placement == "loop":
        ranks = tuple(tuple(range(r, num_chunks, p)) for r in range(p))
    elif kind.placement == "v":
        ranks = tuple((r, 2 * p - 1 - r) for r in range(p))
    else:
        ranks = tuple((r, p - 1 - r) for r in range(p))
    layout = Layout(chunks, ranks)
    return _LAYOUTS.setdefault(layout, layout)


_LAYOUTS: dict[Layout, Layout] = {}
"""One object per distinct layout: the schedule families that place chunks alike (1F1B, ZB-H1, ZB-H2, ...) get
the very same `Layout`, so the cost caches keyed by layouts find them by identity instead of comparing every
chunk."""
