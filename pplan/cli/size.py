"""`pplan size`: how many GPUs of which kind, how long, at what cost and energy, for a model and a token budget
(pplan.sizing). Parses the options, runs the sweep's points over the machine's cores, one `recommend` search each,
with a progress bar, has `pplan.sizing.document` build the `pplan.size/1` document, and prints it or renders one
table per hardware, the answers and the assumptions; the `--svg` picture is written last, so a picture that cannot
be written costs only the picture (its path is checked, and its folder probed, before the sweep).

The workers (`_Runner`): forked with the stop signals blocked (an interrupt during the fork is held, then unwinds
the parent, not swallowed), they ignore Ctrl-C (the parent stops them) and die with the parent (Linux's
parent-death signal, else a watchdog thread on the parent's pid), so a parent killed outright (SIGKILL, SIGHUP,
SIGQUIT) leaves none behind. They are joined with a timeout, then terminated, then killed. A worker that dies (the
out-of-memory killer's SIGKILL) is one line naming the likely cause, exit code 2; a pool that cannot be started
(file descriptor or process limits) leaves the sweep to this process, with one warning line. Every point is a pure
function of its inputs, so the bytes of `--format json` do not depend on `--jobs` or the machine's cores."""

from __future__ import annotations

import contextlib
import ctypes
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from pplan.cli import printable
from pplan.cli.app import JsonAliasOpt, app, console, err_console, format_option, json_text
from pplan.cli.commandline import explain_command
from pplan.cli.files import FORCE_HELP, check_outputs, input_path, write_output
from pplan.cli.options import DEFAULT_MODEL, ModelOpt
from pplan.cli.signature import (
    given,
    release_search_changes,
    search_parameters,
    search_values,
    with_settings,
)
from pplan.errors import ConfigError
from pplan.launchers.names import Launcher
from pplan.profiles.stacks import stack_for_launcher
from pplan.sizing.costs import DEFAULT_PUE
from pplan.sizing.goodput import INTERRUPTIONS_PER_GPU_HOUR, RESTART_S, GoodputInputs
from pplan.sizing.policy import DEFAULT_BATCH_TOKENS, BatchPolicy, default_counts

if TYPE_CHECKING:  # the core loads only when the command runs, not for --help
    from pplan.plan.records import PlanRequest
    from pplan.profiles.hardware_spec import HardwareSpec
    from pplan.sizing.sweep import PointTask, SizePoint

DEFAULT_HARDWARE = "h100-sxm-80gb,h200-sxm-141gb,b200-180gb"
EXIT_NO_ANSWER = 1
"""No count meets --days, or nothing in the sweep is within --budget: the answer is printed all the same (the
nearest miss named on stderr), and the exit code says the goal was not met. (Nothing fitting at all is a usage
error on --gpus, 2.)"""
MAX_JOBS = 256
"""The most worker processes `--jobs` may ask for (the pool is also never larger than a round of the sweep)."""
MAX_COUNTS = 64
"""The most GPU counts a `--gpus` list may name (the default counts from 1 to 16,384 GPUs are 27 per hardware)."""
MAX_HARDWARE = 16
"""The most hardware profiles `--hardware` may name."""
JOIN_S = 5.0
"""How long a stopping worker is waited for before it is terminated, and again before it is killed."""
SizeFormat = Literal["table", "json"]


def gpu_counts(text: str | None, gpus_per_node: int) -> tuple[tuple[int, ...], bool]:
    """`--gpus` as counts and whether the sweep may stop early: a range `LOW..HIGH` (the default counts inside it,
    all of them), a comma list (exactly those), or nothing (the default counts from one node, stopping where
    per-GPU throughput stops paying), up to `pplan.recommend.MAX_GPUS`."""
    from pplan.recommend import MAX_GPUS

    fix = "e.g. --gpus 64..4096 or --gpus 256,512,1024"
    if text is None:
        return default_counts(gpus_per_node, 1, MAX_GPUS), True
    try:
        if ".." in text:
            low_text, high_text = text.split("..", 1)
            low, high = int(low_text), int(high_text)
            if not 1 <= low <= high <= MAX_GPUS:
                raise ConfigError(
                    "--gpus", f"the range {text} must lie within 1..{MAX_GPUS:,}, low first", fix
                )
            counts = default_counts(gpus_per_node, low, high)
            if not counts:
                raise ConfigError(
                    "--gpus",
                    f"no whole number of {gpus_per_node}-GPU nodes in {text} is a default count",
                    fix,
                )
            return counts, False
        items = [x for x in text.split(",") if x.strip()]
        if len(items) > MAX_COUNTS:
            raise ConfigError(
                "--gpus", f"{len(items):,} counts is more than the {MAX_COUNTS} a sweep takes",
                "give a range LOW..HIGH (its default counts) or fewer counts",
            )  # fmt: skip
        values = sorted({int(x) for x in items})
    except ValueError:
        raise ConfigError("--gpus", f"{text!r} is not a range or a list of GPU counts", fix) from None
    if not values or not all(1 <= v <= MAX_GPUS for v in values):
        raise ConfigError("--gpus", f"every count must be 1 to {MAX_GPUS:,}, got {text}", fix)
    return tuple(values), False


def prices(text: str | None, hardware: list[HardwareSpec]) -> tuple[tuple[str, float], ...]:
    """`--price h100-sxm-80gb=2.5,b200-180gb=5` as (hardware, USD per GPU-hour) pairs of the swept hardware."""
    if text is None:
        return ()
    names = {h.name for h in hardware}
    out = []
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        fix = f"write NAME=USD for hardware in the sweep ({', '.join(sorted(names))}), e.g. --price {next(iter(sorted(names)))}=2.5"
        if not sep or name not in names:
            raise ConfigError("--price", f"{item.strip()!r} names no hardware in the sweep", fix)
        try:
            usd = float(value)
        except ValueError:
            raise ConfigError("--price", f"{value!r} is not a number", fix) from None
        if not (math.isfinite(usd) and 0 < usd <= 1e6):
            raise ConfigError("--price", f"{usd:g} USD per GPU-hour is not a price", fix)
        out.append((name, usd))
    return tuple(out)


def _positive(flag: str, value: float | None, fix: str, high: float = math.inf) -> None:
    if value is not None and not (math.isfinite(value) and 0 < value <= high):
        raise ConfigError(flag, f"must be a finite number above 0 (and at most {high:g}), got {value:g}", fix)


PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """In a worker: be killed when the parent dies (Linux's parent-death signal; elsewhere a watchdog thread that
    polls the parent's pid), and leave at once if it already has."""
    armed = False
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    if os.getppid() != parent:
        os._exit(1)
    if not armed:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _start_worker(parent: int) -> None:
    """A worker's first act: die with the parent, leave Ctrl-C to the parent (which stops the workers and reports
    the interrupt once), then take the signals the parent blocked while forking."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)


_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT}
"""Blocked while the pool forks: a signal then is delivered once the workers exist, to a parent that stops them."""


def _started(_: int) -> int:
    """A no-op task whose submission makes the pool fork its workers."""
    return os.getpid()


def _death(code: int | None) -> str:
    """Why a worker process ended, in words, from its exit code."""
    if code is not None and code < 0:
        number = -code
        name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
        if number == signal.SIGKILL:
            return f"killed by {name}, as the out-of-memory killer ends a process that runs out of memory"
        return f"ended by {name}"
    return f"ended with exit code {code}" if code is not None else "ended"


class _Runner:
    """Evaluates a round of tasks over `jobs` processes (fork; in this process when 1, or when no pool can be
    started), with a progress bar on stderr when `show`; a context manager that stops both."""

    def __init__(self, jobs: int, show: bool) -> None:
        self.jobs = jobs
        self.pool: ProcessPoolExecutor | None = None
        self.workers: list[Any] = []
        """The worker processes, kept from their start: a broken pool forgets the one that died."""
        self.show = show
        self.bar: Any = None
        self.task: Any = None
        self.done = 0

    def __enter__(self) -> _Runner:
        if self.jobs > 1:
            try:
                self._start_pool()
            except BaseException:
                self._stop(failed=True)
                raise
        if self.show:
            from rich.progress import Progress

            self.bar = Progress(console=err_console, transient=True)
            self.task = self.bar.add_task("sizing: best plan per GPU count", total=None)
            self.bar.start()
        return self

    def _start_pool(self) -> None:
        """Fork the workers with the stop signals blocked; on a pool that cannot start (descriptor or process
        limits), one warning line and the sweep runs here."""
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        try:
            self.pool = ProcessPoolExecutor(
                self.jobs, mp_context=multiprocessing.get_context("fork"), initializer=_start_worker,
                initargs=(os.getpid(),),
            )  # fmt: skip
            self.pool.submit(_started, 0)  # forks every worker, in this thread, with the signals held
            self.workers = list((getattr(self.pool, "_processes", None) or {}).values())
        except OSError as err:
            self._stop(failed=True)
            self.pool = None
            print(
                printable(
                    f"pplan: warning: cannot start {self.jobs} worker processes ({err.strerror or err}); "
                    "sweeping in this process"
                ),
                file=sys.stderr,
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self.bar is not None:
            self.bar.stop()
        self._stop(failed=kind is not None)

    def _stop(self, failed: bool) -> None:
        """Stop the workers: asked to finish (after a clean sweep) or terminated at once (after an interrupt or a
        failure), each joined for `JOIN_S`, then terminated, then killed; a second Ctrl-C cannot break this."""
        pool = self.pool
        if pool is None:
            return
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if failed else None
        try:
            processes = self.workers or list((getattr(pool, "_processes", None) or {}).values())
            if failed:
                for process in processes:
                    with contextlib.suppress(OSError, ValueError, AttributeError):
                        process.terminate()
            with contextlib.suppress(OSError, RuntimeError):
                pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                _join(process)
        finally:
            self.pool = None
            self.workers = []
            if previous is not None:
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(signal.SIGINT, previous)

    def __call__(self, tasks: list[PointTask]) -> list[SizePoint]:
        from pplan.sizing.sweep import evaluate

        out: dict[int, SizePoint] = {}
        if self.pool is None:
            for k, t in enumerate(tasks):
                out[k] = evaluate(t)
                self._tick()
        else:
            pool = self.pool
            try:
                futures = {pool.submit(evaluate, t): k for k, t in enumerate(tasks)}
                for future in as_completed(futures):
                    out[futures[future]] = future.result()
                    self._tick()
            except BrokenProcessPool:
                raise self._died(pool) from None
        return [out[k] for k in range(len(tasks))]

    def _died(self, pool: ProcessPoolExecutor) -> ConfigError:
        """The one line for a worker that died mid-sweep, naming the likely cause: the first worker ended by a
        signal other than the SIGTERM the broken pool sends the others."""
        processes = self.workers or list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                process.join(JOIN_S)
        codes = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
        first = next((c for c in codes if c < 0 and c != -signal.SIGTERM), codes[0] if codes else None)
        return ConfigError(
            "--jobs",
            f"a sweep worker process died ({_death(first)})",
            "run again with fewer --jobs (each worker holds its own search) or more memory; --jobs 1 uses the least",
        )

    def _tick(self) -> None:
        self.done += 1
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=self.done, description=f"sizing: {self.done} points")


def _join(process: Any) -> None:
    """Wait for a worker `JOIN_S`, then terminate it and wait again, then kill it."""
    for stop in (None, "terminate", "kill"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if stop is not None:
                getattr(process, stop)()
            process.join(JOIN_S)
            if not process.is_alive():
                return


SIZE_ORDER = (
    "model", "train_tokens", "hardware", "gpus", "days", "budget", "global_batch_tokens", "max_global_batch_tokens",
    "seq_len", "precisions", "launcher", "stack", "tp_comm_overlap", "price", "pue", "interruptions_per_gpu_hour",
    "storage_gb_per_s", "restart_minutes", "jobs", "output", "as_json", "svg", "force",
)  # fmt: skip
"""size's options in `--help` order (pplan.cli.signature)."""
SIZE_PLAN_SETTINGS = ("seq_len", "precision", "stack", "tp_comm_overlap")
"""The plan settings every point's search takes from the command line (the rest are each point's own)."""
SIZE_PANELS = {"precision": ("Plans", "GEMM precisions to try, a comma list of bf16, fp8, mxfp8.")}


@app.command()
@with_settings(search_parameters({"stack": None}, SIZE_PLAN_SETTINGS, SIZE_PANELS), SIZE_ORDER)
def size(
    ctx: typer.Context,
    model: ModelOpt = DEFAULT_MODEL,
    train_tokens: Annotated[
        float | None,
        typer.Option(
            rich_help_panel="Query", help="Tokens to train on, e.g. 15e12 (required).", show_default=False
        ),
    ] = None,
    hardware: Annotated[
        str,
        typer.Option(
            rich_help_panel="Query",
            help="Comma list of hardware profiles (bundled names or .toml files) to compare.",
        ),
    ] = DEFAULT_HARDWARE,
    gpus: Annotated[
        str | None,
        typer.Option(
            rich_help_panel="Query",
            help="GPU counts: LOW..HIGH (whole nodes: powers of two and the 1.5× between), or a comma list. "
            "Default: from one node up to where per-GPU throughput stops paying.",
            show_default=False,
        ),
    ] = None,
    days: Annotated[
        float | None,
        typer.Option(
            rich_help_panel="Goal", help="Deadline in days: the fewest GPUs and the cheapest that meet it."
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            rich_help_panel="Goal", help="Budget in US dollars (needs prices): the fastest within it."
        ),
    ] = None,
    global_batch_tokens: Annotated[
        int,
        typer.Option(
            rich_help_panel="Batch", help="Global batch in tokens (at the smallest count when it grows)."
        ),
    ] = DEFAULT_BATCH_TOKENS,
    max_global_batch_tokens: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="Batch",
            help="Let the batch grow with the GPU count up to this many tokens (default: fixed).",
        ),
    ] = None,
    launcher: Annotated[
        Launcher | None, typer.Option(rich_help_panel="Plans", help="Keep only plans this launcher runs.")
    ] = None,
    price: Annotated[
        str | None,
        typer.Option(
            rich_help_panel="Cost and energy",
            help="USD per GPU-hour, NAME=USD comma list (no price, no cost column).",
        ),
    ] = None,
    pue: Annotated[
        float,
        typer.Option(
            rich_help_panel="Cost and energy", help="Facility power usage effectiveness for energy."
        ),
    ] = DEFAULT_PUE,
    interruptions_per_gpu_hour: Annotated[
        float,
        typer.Option(
            rich_help_panel="Interruptions",
            help="Unexpected interruptions per GPU-hour (default: Llama 3's 419 in 54 days on 16,384 GPUs).",
        ),
    ] = INTERRUPTIONS_PER_GPU_HOUR,
    storage_gb_per_s: Annotated[
        float | None,
        typer.Option(
            rich_help_panel="Interruptions",
            help="Checkpoint bandwidth in GB/s for the whole job (default: 122 MB/s per GPU, Llama 3's 2 TB/s over 16,384).",
        ),
    ] = None,
    restart_minutes: Annotated[
        float,
        typer.Option(
            rich_help_panel="Interruptions",
            help="Relaunch time after an interruption, before the checkpoint is read.",
        ),
    ] = RESTART_S / 60,
    jobs: Annotated[
        int,
        typer.Option(
            rich_help_panel="Output",
            help=f"Processes for the sweep, up to {MAX_JOBS} (default: the machine's cores); the answer is the "
            "same for any.",
        ),
    ] = 0,
    output: Annotated[SizeFormat, format_option("pplan.size/1")] = "table",
    as_json: JsonAliasOpt = False,
    svg: Annotated[
        Path | None,
        typer.Option(rich_help_panel="Output", help="Also write the time and cost chart as an SVG file."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", rich_help_panel="Output", help=FORCE_HELP)] = False,
    **plans: Any,
) -> None:
    """How many GPUs, of which kind, how long and at what cost and energy to train a model on a token budget."""
    from pplan.explain import MAX_TRAIN_TOKENS
    from pplan.plan.configuration import check_precision
    from pplan.plan.rules import check_count
    from pplan.profiles.catalog import load_hardware, load_model
    from pplan.render.size import render_size
    from pplan.render.size_chart import size_svg, size_terminal
    from pplan.search import SearchRequest
    from pplan.sizing import answers
    from pplan.sizing.costs import prices_per_gpu_hour
    from pplan.sizing.document import DAY_S, size_document
    from pplan.sizing.sweep import SizeQuery, sweep

    if train_tokens is None:
        raise ConfigError(
            "--train-tokens", "is required: the tokens to train on", "e.g. --train-tokens 15e12"
        )
    _positive("--train-tokens", train_tokens, "e.g. --train-tokens 15e12", MAX_TRAIN_TOKENS)
    _positive("--days", days, "e.g. --days 30", 36_500)
    _positive("--budget", budget, "e.g. --budget 5e6")
    _positive("--global-batch-tokens", global_batch_tokens, "e.g. --global-batch-tokens 4194304", 2**40)
    _positive(
        "--max-global-batch-tokens", max_global_batch_tokens, "e.g. --max-global-batch-tokens 16777216", 2**40
    )
    _positive("--pue", pue, "e.g. --pue 1.2", 10)
    if pue < 1:
        raise ConfigError("--pue", f"a PUE is at least 1 (the IT load alone), got {pue:g}", "e.g. --pue 1.2")
    _positive("--interruptions-per-gpu-hour", interruptions_per_gpu_hour, "e.g. 2e-5", 1)
    _positive("--storage-gb-per-s", storage_gb_per_s, "e.g. --storage-gb-per-s 500", 1e9)
    if not (math.isfinite(restart_minutes) and 0 <= restart_minutes <= 10_000):
        raise ConfigError("--restart-minutes", f"must be 0 to 10,000, got {restart_minutes:g}", "e.g. 10")
    if not 0 <= jobs <= MAX_JOBS:
        raise ConfigError(
            "--jobs", f"must be 0 (the machine's cores) to {MAX_JOBS}, got {jobs}", "e.g. --jobs 2"
        )
    as_json = as_json or output == "json"
    if max_global_batch_tokens is not None and max_global_batch_tokens < global_batch_tokens:
        raise ConfigError(
            "--max-global-batch-tokens",
            f"{max_global_batch_tokens:,} is below --global-batch-tokens {global_batch_tokens:,}",
            "give a ceiling at or above the starting batch",
        )
    names = [n.strip() for n in hardware.split(",") if n.strip()]
    if len(names) > MAX_HARDWARE:
        raise ConfigError(
            "--hardware", f"{len(names)} profiles is more than the {MAX_HARDWARE} a sweep compares",
            "name fewer hardware profiles",
        )  # fmt: skip
    read = {"--model": input_path(model)} | {f"--hardware {n}": input_path(n) for n in names}
    check_outputs({"--svg": svg}, read, force=force)
    if not names or len(set(names)) != len(names):
        raise ConfigError(
            "--hardware",
            f"{hardware!r} is not a list of distinct profiles",
            "e.g. --hardware h100-sxm-80gb,b200-180gb",
        )
    specs = [load_hardware(n) for n in names]
    _check_distinct(names, specs)
    model_spec = load_model(model)
    searched = search_values(plans)
    asked_seq = searched.pop("seq_len")
    if asked_seq is not None:
        check_count("--seq-len", asked_seq)
    seq = asked_seq or model_spec.seq_len
    if global_batch_tokens < seq:
        raise ConfigError(
            "--global-batch-tokens", f"{global_batch_tokens:,} tokens is less than one sequence of {seq:,}",
            f"give at least {seq:,}",
        )  # fmt: skip
    for spec in specs:
        for asked in searched["precisions"]:
            check_precision(spec, asked)
    counts: dict[str, tuple[int, ...]] = {}
    stop_early = True
    for spec in specs:
        counts[spec.name], stop_early = gpu_counts(gpus, spec.gpus_per_node)
    price_list = prices(price, specs)
    priced = prices_per_gpu_hour(specs, price_list)
    if budget is not None and set(priced) != {s.name for s in specs}:
        missing = sorted({s.name for s in specs} - set(priced))
        raise ConfigError(
            "--budget",
            f"needs a price for every hardware; none for {', '.join(missing)}",
            "add --price NAME=USD",
        )
    largest_round = min(2 * len(specs), sum(len(c) for c in counts.values()))
    workers = max(1, min(jobs or len(os.sched_getaffinity(0)), largest_round))
    searched["stack"] = searched["stack"] or stack_for_launcher(launcher)
    template = SearchRequest(
        **searched, gpus=1, global_batch=1, seq_len=seq, launcher=launcher, prefetch=workers == 1
    )
    batch = BatchPolicy(global_batch_tokens, max_global_batch_tokens)
    goodput_inputs = GoodputInputs(
        interruptions_per_gpu_hour=interruptions_per_gpu_hour,
        storage_bytes_per_s=storage_gb_per_s * 1e9 if storage_gb_per_s is not None else None,
        restart_s=restart_minutes * 60,
    )
    told = given(plans, ctx)
    routed = model_spec.moe is not None
    knobs = tuple(
        (spec.name, tuple(release_search_changes(searched, told, model_spec.name, spec.name, routed).items()))
        for spec in specs
    )  # a named release's recipe knobs, per hardware
    query = SizeQuery(train_tokens, seq, batch, template, goodput_inputs, price_list, pue, knobs)
    with _Runner(workers, sys.stderr.isatty() and not as_json) as run:
        points = sweep(model_spec, specs, counts, query, run, stop_early)
    if not any(p.fits for p in points):
        raise ConfigError(
            "--gpus",
            f"nothing fits {model_spec.name} at any count swept; at the largest, {_largest(points)}",
            "give larger counts (--gpus LOW..HIGH), more memory per GPU (--hardware), or a shorter --seq-len",
        )

    def command(hardware_name: str, request: PlanRequest) -> str:
        """The `pplan explain` line of a point's plan, with the --hardware and --model the user gave."""
        return explain_command(model, _hardware_arg(hardware_name, names, specs), request)

    doc = size_document(
        model_spec, specs, query, points, deadline_days=days, budget_usd=budget, stop_early=stop_early,
        command=command,
    )  # fmt: skip
    deadline_s = days * DAY_S if days is not None else None
    if as_json:
        print(json_text(doc.model_dump(mode="json", by_alias=True)))
    else:
        console.print(render_size(doc, console.width))
        if len({p.gpus for p in points if p.finishes}) >= 2:
            console.print(size_terminal(doc, console.width))
        shown = _shown(points, deadline_s)
        if shown is not None and shown.request is not None:
            console.print("Every number of that plan, with its derivation:", style="bold")
            console.print(
                "  " + command(shown.hardware, shown.request),
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
    sys.stdout.flush()  # the answer first: a picture that cannot be written costs only the picture
    if svg is not None:
        write_output(svg, size_svg(doc), "--svg", force)
    missed = None
    if deadline_s is not None and answers.cheapest_meeting(points, deadline_s) is None:
        near = answers.nearest_miss(points)
        where = f"{near.hardware} × {near.gpus:,}, {near.wall_s / DAY_S:,.1f} days" if near else "none"
        missed = f"no count in the sweep trains it within {days:g} days; nearest: {where}"
    elif budget is not None and answers.fastest_within(points, budget) is None:
        cheapest = min(answers.finishing(points), key=answers.spend, default=None)
        where = (
            f"{cheapest.hardware} × {cheapest.gpus:,}, {_usd(answers.spend(cheapest))}"
            if cheapest
            else "none"
        )
        missed = f"nothing in the sweep trains it within ${budget:,.0f}; cheapest: {where}"
    if missed is not None:
        print(printable(f"pplan: {missed}"), file=sys.stderr)
        raise typer.Exit(EXIT_NO_ANSWER)


def _usd(value: float) -> str:
    return f"${value:,.0f}"


def _check_distinct(names: list[str], specs: list[HardwareSpec]) -> None:
    """Refuse two `--hardware` entries that load the same profile name (a bundled name and a copy of its file)."""
    seen: dict[str, str] = {}
    for name, spec in zip(names, specs, strict=True):
        if spec.name in seen:
            raise ConfigError(
                "--hardware",
                f"{name!r} and {seen[spec.name]!r} are both the profile {spec.name!r}",
                "name each profile once (a copy of a profile needs a name of its own to be compared)",
            )
        seen[spec.name] = name


def _hardware_arg(hardware_name: str, names: list[str], specs: list[HardwareSpec]) -> str:
    """What `--hardware` the explain line takes for a hardware profile's name (the name or file the user gave)."""
    return next(n for n, s in zip(names, specs, strict=True) if s.name == hardware_name)


def _largest(points: list[SizePoint]) -> str:
    last = max(points, key=lambda p: p.gpus)
    return f"{last.hardware} × {last.gpus:,}: {last.reason}"


def _shown(points: list[SizePoint], deadline_s: float | None) -> SizePoint | None:
    """The point whose explain line is printed: the cheapest that meets the deadline, else the fastest of the
    Pareto front."""
    from pplan.sizing import answers

    if deadline_s is not None:
        return answers.cheapest_meeting(points, deadline_s)
    return next(iter(answers.pareto(points)), None)
