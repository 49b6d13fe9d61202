"""`pplan recommend`: rank every feasible configuration for a model, hardware, GPU count and global batch."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer

from pplan.cli.app import JsonAliasOpt, app, console, err_console, json_text
from pplan.cli.commandline import explain_command
from pplan.cli.options import (
    DEFAULT_GLOBAL_BATCH,
    DEFAULT_GPUS,
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    HardwareOpt,
    ModelOpt,
)
from pplan.cli.signature import (
    RELEASE_LIST_KNOBS,
    given,
    knob_parameters,
    release_search_changes,
    search_parameters,
    search_values,
    with_settings,
)
from pplan.errors import ConfigError
from pplan.launchers.names import LAUNCHERS, Launcher
from pplan.profiles.stacks import DEFAULT_STACK, launcher_for_stack, stack_for_launcher

if TYPE_CHECKING:  # the core loads only when the command runs, not for --help
    from pplan.documents.recommend import RecommendReport
    from pplan.plan.records import PlanRequest
    from pplan.profiles.hardware_spec import HardwareSpec
    from pplan.profiles.model_spec import ModelSpec
    from pplan.recommend import Recommendation, Recommended
    from pplan.search import LauncherFilter, SearchRequest

Format = Literal["table", "json", Launcher]
"""What `recommend` prints: the ranked table, the pplan.recommend/2 document, or the best plan's launcher
settings."""


MaxVpOpt = Annotated[
    int, typer.Option(rich_help_panel="Plan axes", help="Largest v to try for interleaved schedules.")
]
PartialRecomputeOpt = Annotated[
    bool,
    typer.Option(
        rich_help_panel="Memory knobs",
        help="With full recompute among the modes: also try the first N layers of every chunk (Megatron-LM "
        "--recompute-method block), the least N that fits.",
    ),
]
EmptyEndChunksOpt = Annotated[
    bool,
    typer.Option(
        rich_help_panel="Search",
        help="Also try layer splits whose first or last chunk holds only the embedding or the loss, where a "
        "cut has no other split (e.g. DeepSeek-V3's 61 layers over 4 × 8 chunks). More cuts: a slower search.",
    ),
]
HybridShardOpt = Annotated[
    bool,
    typer.Option(
        "--hybrid-shard/--no-hybrid-shard",
        rich_help_panel="Memory knobs",
        help="With ZeRO ≥ 1: also try sharding over one node's data-parallel GPUs, replicated across nodes "
        "(HSDP; explain --shard-group), where full sharding fits.",
    ),
]
KeepGatheredOpt = Annotated[
    bool,
    typer.Option(
        rich_help_panel="Memory knobs",
        help="With ZeRO-3: also try keeping the gathered weights from forward to backward (explain "
        "--no-reshard-after-forward), where resharding fits.",
    ),
]
MinMicrobatchesOpt = Annotated[int, typer.Option(rich_help_panel="Search", help="Smallest m to accept.")]
LauncherOpt = Annotated[
    Launcher | None,
    typer.Option(
        rich_help_panel="Stack",
        help="Keep only what this launcher can run (default: the launcher of --stack, Megatron-LM).",
    ),
]
IncludeUnrunnableOpt = Annotated[
    bool,
    typer.Option(
        rich_help_panel="Search",
        help="Also rank plans the stack's launcher does not run as planned (schedules or knobs no real "
        "stack has); by default only plans it runs are ranked.",
    ),
]
ShowCommandsOpt = Annotated[
    bool,
    typer.Option(
        rich_help_panel="Output",
        help="Print the `pplan explain` line of every shown plan, not only the first.",
    ),
]
MaxExtrapolationOpt = Annotated[
    int | None,
    typer.Option(
        rich_help_panel="Search",
        help="Keep only plans outside the calibrated envelope on at most this many axes (0: inside it; "
        "explain names the axes).",
    ),
]
CrossNodeTpOpt = Annotated[
    bool, typer.Option(rich_help_panel="Search", help="Let t exceed the GPUs per node.")
]
TopOpt = Annotated[
    int, typer.Option("--top", rich_help_panel="Output", help="How many configurations to show.")
]
FormatOpt = Annotated[
    Format,
    typer.Option(
        "--format",
        rich_help_panel="Output",
        help=f"table, json or a launcher's settings: {', '.join(LAUNCHERS)}.",
    ),
]

JsonOpt = JsonAliasOpt
Pick = Literal["best", "safest"]
RankOpt = Annotated[
    int | None,
    typer.Option(
        "--rank",
        rich_help_panel="Output",
        help="With a launcher --format: print the settings of the plan of this rank (default 1).",
        show_default=False,
    ),
]
PickOpt = Annotated[
    Pick | None,
    typer.Option(
        "--pick",
        rich_help_panel="Output",
        help="With a launcher --format: best (rank 1) or safest (the safest bet among the plans tied with #1).",
        show_default=False,
    ),
]

SEARCH_KNOBS: dict[str, tuple[object, object]] = {
    "max_vp": (MaxVpOpt, 8),
    "partial_recompute": (PartialRecomputeOpt, True),
    "empty_end_chunks": (EmptyEndChunksOpt, False),
    "hybrid_sharding": (HybridShardOpt, True),
    "keep_gathered": (KeepGatheredOpt, True),
    "min_microbatches": (MinMicrobatchesOpt, 1),
    "allow_cross_node_tp": (CrossNodeTpOpt, False),
    "top_n": (TopOpt, 10),
}
"""recommend's options that are `SearchRequest` fields of the same name but no plan setting: how far and how the
search looks (type and option, default)."""
SEARCH_DEFAULTS = {"gpus": DEFAULT_GPUS, "global_batch": DEFAULT_GLOBAL_BATCH, "stack": None}
"""pplan's default example where it is not the settings' defaults; the stack defaults to the launcher's."""

RECOMMEND_ORDER = (
    "model", "hardware", "gpus", "global_batch", "seq_len", "tp", "pp", "cp", "ep", "etp", "precisions", "vp",
    "max_vp", "micro_batch", "schedules", "recompute", "zero_stages", "grad_dtypes", "offload", "partial_recompute",
    "recompute_modules", "empty_end_chunks", "hybrid_sharding", "keep_gathered", "min_microbatches",
    "headroom_fraction", "launcher", "include_unrunnable", "show_commands", "stack", "tp_comm_overlap", "jitter",
    "max_extrapolation", "allow_cross_node_tp", "top_n", "output", "as_json", "rank", "pick",
)  # fmt: skip
"""recommend's options in `--help` order (pplan.cli.signature: a setting not named here ends its panel)."""


@app.command()
@with_settings([*search_parameters(SEARCH_DEFAULTS), *knob_parameters(SEARCH_KNOBS)], RECOMMEND_ORDER)
def recommend(
    ctx: typer.Context,
    model: ModelOpt = DEFAULT_MODEL,
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    launcher: LauncherOpt = None,
    include_unrunnable: IncludeUnrunnableOpt = False,
    show_commands: ShowCommandsOpt = False,
    max_extrapolation: MaxExtrapolationOpt = None,
    output: FormatOpt = "table",
    as_json: JsonOpt = False,
    rank: RankOpt = None,
    pick: PickOpt = None,
    **searched: Any,
) -> None:
    """Search every (t, p, d, v, cp, schedule, micro-batch, recompute, ZeRO, grad dtype, sharding) and rank what fits by predicted throughput."""
    output = _json_alias(output, as_json)
    _check_choice(output, rank, pick, searched["top_n"])
    query = Query(
        model,
        hardware,
        launcher,
        include_unrunnable,
        max_extrapolation,
        output,
        searched,
        given(searched, ctx),
    )
    model_spec, hardware_spec, request, answer = query.answer(progress=output == "table")
    if output == "json":
        print(json_text(query.document(model_spec, answer).model_dump(mode="json", by_alias=True)))
        if not answer.result.candidates:
            raise typer.Exit(EXIT_NOTHING_FITS)
    elif output in LAUNCHERS:
        command = query.command
        _print_launcher_settings(answer, model_spec, output, command, model, _chosen(answer, rank, pick))
    else:
        routed = model_spec.moe is not None
        _print_table(
            answer, hardware_spec, request, query.command, model, show_commands, max_extrapolation, routed
        )


@dataclass(frozen=True)
class Query:
    """One recommend query as its options give it (the settings keyed by `SearchRequest` field, as typer passes
    them): the search it runs and the document it answers with, for the command and the Python API (pplan.api)."""

    model: str
    hardware: str
    launcher: Launcher | None
    include_unrunnable: bool
    max_extrapolation: int | None
    output: Format
    searched: dict[str, Any]
    given: frozenset[str] = frozenset()
    """The `searched` fields the user set: a named stack release sets its recipe's knobs among the others
    (`release_search_changes`)."""

    def command(self, request: PlanRequest) -> str:
        """The `pplan explain` line of a plan, with the --model and --hardware given."""
        return explain_command(self.model, self.hardware, request)

    def answer(self, progress: bool = False) -> tuple[ModelSpec, HardwareSpec, SearchRequest, Recommended]:
        """The query checked, its profiles loaded, and the search's answer (with a progress bar on a terminal when
        `progress`)."""
        from pplan.plan.configuration import check_precision
        from pplan.profiles.catalog import load_hardware, load_model
        from pplan.search import SearchRequest

        launcher, searched, output = self.launcher, self.searched, self.output
        if launcher is None and output in LAUNCHERS:
            launcher = output  # emit only what that launcher can run
        derived = launcher is None and not self.include_unrunnable
        if derived:
            launcher = cast(
                Launcher | None, launcher_for_stack(searched["stack"] or DEFAULT_STACK)
            )  # rank what runs
        limit = self.max_extrapolation
        if limit is not None and limit < 0:
            raise ConfigError("--max-extrapolation", f"must be 0 or more, got {limit}", "e.g. 0 or 2")
        values = search_values(searched)
        values["stack"] = values["stack"] or stack_for_launcher(launcher)
        model_spec = load_model(self.model)
        hardware_spec = load_hardware(self.hardware)
        values |= release_search_changes(
            values, self.given, model_spec.name, hardware_spec.name, model_spec.moe is not None
        )
        knobs = {name: searched[name] for name in SEARCH_KNOBS}
        request = SearchRequest(
            **values, **knobs, launcher=launcher, max_extrapolation=limit, split_p2p=output == "json"
        )  # the step-time breakdown only the JSON shows

        for asked in request.precisions:
            check_precision(hardware_spec, asked)
        if any(request.offload):
            hardware_spec.require_host_link()
        launcher_filter = _launcher_filter(model_spec, request, derived)
        return (
            model_spec,
            hardware_spec,
            request,
            _answer(model_spec, hardware_spec, request, launcher_filter, progress),
        )

    def document(self, model_spec: ModelSpec, answer: Recommended) -> RecommendReport:
        """The pplan.recommend/2 document of `answer`."""
        from pplan.recommend import launcher_arguments, recommend_report

        return recommend_report(answer, self.command, partial(launcher_arguments, model_spec))


def search(
    model: ModelSpec,
    hw: HardwareSpec,
    request: SearchRequest,
    launcher: LauncherFilter | None,
    progress: Callable[[int], None] | None = None,
) -> Recommended:
    """The whole answer: searched, explained, annotated (pplan.recommend.recommend_answer)."""
    from pplan.recommend import recommend_answer

    return recommend_answer(model, hw, request, launcher, progress)


def _launcher_filter(model: ModelSpec, request: SearchRequest, derived: bool) -> LauncherFilter | None:
    """What the query's launcher cannot run, asked as the search enumerates; None without a launcher. A launcher
    that cannot build the model runs nothing (`derived`: the launcher is the stack's, not asked for)."""
    from pplan.launchers import support

    launcher = request.launcher
    if launcher is None:
        return None
    if derived and support.model_unsupported_reason(launcher, model) is not None:
        raise ConfigError(
            "--stack", f"{launcher}, the launcher of stack {request.stack}, cannot build {model.name}",
            "pass --include-unrunnable to rank plans no launcher runs, or another --stack",
        )  # fmt: skip
    support.check_model(launcher, model)
    return support.SearchFilter(launcher, model, request.tp_comm_overlap, request.recompute_modules)


def _answer(
    model: ModelSpec,
    hw: HardwareSpec,
    request: SearchRequest,
    launcher: LauncherFilter | None,
    progress: bool,
) -> Recommended:
    """`search`, with a progress bar on a terminal when `progress`."""
    if not (sys.stderr.isatty() and progress):
        return search(model, hw, request, launcher)
    from rich.progress import Progress

    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("simulating the best candidates", total=None)

        def tick(done: int) -> None:
            bar.update(task, completed=done)

        return search(model, hw, request, launcher, tick)


def _json_alias(output: Format, as_json: bool) -> Format:
    """`--json` as `--format json` (refused beside another format)."""
    if as_json and output not in ("table", "json"):
        raise ConfigError("--json", f"asks for the JSON document, --format {output} for launcher settings",
                          "drop one of them")  # fmt: skip
    return "json" if as_json else output


def _check_choice(output: Format, rank: int | None, pick: Pick | None, top_n: int) -> None:
    """`--rank` and `--pick` choose the plan a launcher format prints: one of them, a rank among those shown."""
    if rank is None and pick is None:
        return
    flag = "--rank" if rank is not None else "--pick"
    if rank is not None and pick is not None:
        raise ConfigError("--rank", f"and --pick {pick} both choose the plan", "give one of them")
    if output not in LAUNCHERS:
        raise ConfigError(
            flag, "chooses the plan whose launcher settings are printed", f"add --format {' or '.join(LAUNCHERS[:2])}"
        )  # fmt: skip
    if rank is not None and not 1 <= rank <= top_n:
        raise ConfigError("--rank", f"must be 1 to --top {top_n}, got {rank}", f"raise --top to at least {rank}"
                          if rank > top_n else "e.g. --rank 2")  # fmt: skip


def _chosen(answer: Recommended, rank: int | None, pick: Pick | None) -> tuple[int, str]:
    """The rank `--rank`/`--pick` chose among the shown plans (1 by default), and why, in words."""
    from pplan.launchers.capabilities import WORDS
    from pplan.recommend import safest_tied

    shown = len(answer.result.candidates)
    safest = safest_tied(answer.notes)
    if rank is not None:
        if shown and rank > shown:
            raise ConfigError("--rank", f"only {shown} plans fit, got {rank}", f"pick 1 to {shown}")
        return rank, f"chosen by --rank {rank}"
    if pick == "safest":
        if safest is None:
            return 1, "chosen by --pick safest: no other plan is tied with #1, so #1 is the safest bet"
        note = answer.notes[safest - 1]
        axes = f"{note.extrapolated_axes} {'axis' if note.extrapolated_axes == 1 else 'axes'}"
        return safest, (
            f"chosen by --pick safest: the safest bet among the plans tied with #1 ({axes} outside the calibrated "
            f"envelope, runs on {' and '.join(WORDS[r] for r in note.runs_on) or 'no launcher'}, {note.knobs} non-default "
            f"knob{'s' if note.knobs != 1 else ''})"
        )
    why = "the best predicted" + (" (--pick best)" if pick == "best" else "")
    if safest is not None and safest != 1:
        why += f"; the safest bet tied with it is #{safest}: --pick safest prints that one"
    return 1, why


def _print_launcher_settings(
    answer: Recommended,
    model: ModelSpec,
    output: str,
    command: Callable[[PlanRequest], str],
    model_arg: str,
    chosen: tuple[int, str],
) -> None:
    """The chosen plan's settings for launcher `output`, then comment lines naming it and why it was chosen (after
    the last flag, so the block pastes whole after the launch command)."""
    from pplan.launchers import launcher_text
    from pplan.plan.configuration import make_plan

    if not answer.result.candidates:
        raise ConfigError(
            "--format",
            "no configuration fits, so there is nothing to launch",
            _fits_from(answer.least, model_arg),
        )
    rank, why = chosen
    plan = answer.result.candidates[rank - 1]
    perf = plan.report.performance
    assert perf is not None
    text = launcher_text(output, model, make_plan(model, plan.request))
    print(text.rstrip("\n"))
    print(
        f"# pplan recommend: rank {rank} of the plans {output} runs ({why}), {perf.tokens_per_s / 1e6:.3f} "
        f"Mtok/s predicted ({perf.step_s:.3g} s a step); every number: {command(plan.request)}"
    )


def _print_table(
    answer: Recommended,
    hw: HardwareSpec,
    request: SearchRequest,
    command: Callable[[PlanRequest], str],
    model_arg: str,
    show_commands: bool,
    max_extrapolation: int | None,
    model_routed: bool = False,
) -> None:
    """The ranked table, a better batch, and the `pplan explain` line of the best (of each: `show_commands`); or,
    when nothing fits, why and where it would."""
    from pplan.cost.placement import domains_sentence
    from pplan.render.recommend import render_recommend

    result, better, gpus, batch = answer.result, answer.better, request.gpus, request.global_batch
    title = (
        f"{answer.inputs.model} on {gpus:,} × {hw.name}, global batch {batch:,} × "
        f"{answer.inputs.seq_len:,} tokens: best {len(result.candidates)} by predicted tokens/s"
    )
    best = result.candidates[0].report.performance if result.candidates else None
    status = best.confidence if best is not None else ""
    console.print(domains_sentence(hw, gpus), markup=False, highlight=False)  # the NVLink domains it fills
    if request.release is not None:
        console.print(_release_sentence(request, model_routed), markup=False, highlight=False)
    console.print(render_recommend(result, title, answer.elapsed_s, console.width, answer.notes, status))
    if better is not None:
        gain = better[1].tokens_per_s / result.candidates[0].tokens_per_s - 1
        console.print(
            f"An awkward batch: {batch:,} sequences force t·p·cp to a multiple of "
            f"{gpus // math.gcd(gpus, batch)} on {gpus:,} GPUs; global batch {better[0]:,} gives {gain:.0%} "
            f"more tokens/s (pplan recommend ... --global-batch {better[0]})."
        )
    if not result.candidates:
        outside = answer.outside
        words = _outside_words(outside, max_extrapolation) if outside else _fits_from(answer.least, model_arg)
        console.print(words, markup=False, highlight=False)
        raise typer.Exit(EXIT_NOTHING_FITS)
    shown = result.candidates if show_commands else result.candidates[:1]
    console.print(
        "Every number of " + ("each plan" if show_commands else "the best (--show-commands: of each)") + ":",
        style="bold",
    )
    for rank, cand in enumerate(shown, 1):
        console.print(f"  #{rank}: " + command(cand.request), soft_wrap=True, markup=False, highlight=False)


def _release_sentence(request: SearchRequest, routed: bool) -> str:
    """The stack knobs the ranked plans were priced with under a named release (its recipe's, or a flag's); the
    routed models' knobs only for a routed model."""
    from pplan.plan.settings import SETTING
    from pplan.profiles.releases import RELEASE_KNOBS

    shown = []
    for name in sorted(RELEASE_KNOBS & set(SETTING)):
        setting, form = SETTING[name], SETTING[name].search
        if form is None or (not routed and setting.help.startswith("Routed models")):
            continue
        if form.form == "same":
            shown.append(setting.spelled(getattr(request, form.field)))
        elif name in RELEASE_LIST_KNOBS:  # the list searched, else the one value
            listed = getattr(request, form.field)
            shown.append(f"{setting.flag} {','.join(listed) or getattr(request, name)}")
    return (
        f"{request.stack} {request.release}: ranked with {' '.join(shown)} (its recipe's knobs where no flag set "
        "them; TP and EP overlap where a plan's cut takes them)."
    )


EXIT_NOTHING_FITS = 1
"""Nothing fits: the closest misses and the least GPUs that fit are printed (the JSON is printed too)."""


def _fits_from(least: tuple[int, Recommendation] | None, model: str) -> str:
    """Where the same query first fits, in words (`least_gpus_that_fit`)."""
    if least is None:
        return "no whole-node count up to 16,384 GPUs fits it with this batch: relax the constraints"
    gpus, cand = least
    return (
        f"it fits from {gpus:,} GPUs (--gpus {gpus}), at {cand.tokens_per_s / 1e6:.3f} Mtok/s predicted there"
    )


def _outside_words(best: Recommendation, allowed: int | None) -> str:
    """Why `--max-extrapolation` left nothing: the best plan outside the envelope and the axes it leaves it on."""
    perf = best.report.performance
    assert perf is not None
    axes = "; ".join(f"{x.axis}: {x.detail}" for x in perf.extrapolation)
    return (
        f"No plan lies within {allowed} axes of the calibrated envelope (--max-extrapolation {allowed}): there is no "
        f"calibrated answer. The best outside it predicts {perf.tokens_per_s / 1e6:.3f} Mtok/s and leaves it on "
        f"{len(perf.extrapolation)}: {axes}."
    )
