"""Two test tiers: `python -m pytest -q` runs the fast tier; `python -m pytest -q --all-tiers` runs every test.

The acceptance tier (`@pytest.mark.acceptance`, or `pytestmark = pytest.mark.acceptance` for a whole module) holds
what costs seconds rather than milliseconds: anything that imports torch or launches its processes, the wheel
build, the slow calibration fits and practice runs, ruff and mypy, and any other test over about a second. Without
`--all-tiers` those tests are deselected (and counted as such in pytest's summary, with a line saying how to run
them); `-m EXPR` selects by marker as usual and then decides on its own (`-m acceptance` runs only that tier).

Import torch inside the tests or fixtures that need it, never at a module's top level: every module is collected
(imported) in the fast tier too, and importing torch alone takes seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ["PPLAN_CACHE_DIR"] = (
    "off"  # no structures kept between runs (pplan.cli.cache): each test starts cold,
)
# and none writes to the user's cache; tests/test_structure_cache.py turns it on where it is the subject

ALL_TIERS = "--all-tiers"


@pytest.fixture(autouse=True, scope="session")
def _validate_fits_once() -> Iterator[None]:
    """`pplan validate` fits every GPU type's efficiency with each published set left out: about 7 s, and several
    tests run the command. Its fits depend only on the published sets and the flag, and come back as frozen data,
    so the command's runs in one test process share them (`check_sets` itself is tested directly)."""
    from pplan.validation.published import check_sets as fitted

    kept: dict[str, Any] = {}

    def check_sets_once(published: list[dict[str, Any]], *args: Any) -> Any:
        named = [f"{a.__module__}.{a.__qualname__}" if callable(a) else a for a in args]
        key = json.dumps([published, named], sort_keys=True, default=str)
        if key not in kept:
            kept[key] = fitted(published, *args)
        return list(kept[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "pplan.validation.published.check_sets", check_sets_once
        )  # the command imports it per run
        yield


_DROPPED = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        ALL_TIERS,
        action="store_true",
        default=False,
        help="run the acceptance tier too (torch launches, wheel build, calibration, ruff and mypy): every test",
    )


def _fast_tier_only(config: pytest.Config) -> bool:
    return not config.getoption(ALL_TIERS) and not config.getoption("markexpr")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _fast_tier_only(config):
        return
    keep = [item for item in items if item.get_closest_marker("acceptance") is None]
    dropped = [item for item in items if item.get_closest_marker("acceptance") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    config.stash[_DROPPED] = len(dropped)
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker: the controller prints the summary
        config.workeroutput["dropped"] = len(dropped)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: every worker collects (and deselects) the same tests; keep one worker's count."""
    node.config.stash[_DROPPED] = node.workeroutput.get("dropped", 0)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    dropped = config.stash.get(_DROPPED, 0)
    if dropped:
        terminalreporter.write_line(
            f"fast tier: {dropped} acceptance test{'s' * (dropped != 1)} not run; "
            f"`python -m pytest -q {ALL_TIERS}` runs every test"
        )
