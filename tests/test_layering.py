"""pplan's layers, read from ARCHITECTURE.md: its table lists the folders in layer order, and a module imports only
from its own row and the rows above it. An import of a row below (an arrow climbing back up toward the command
line) fails here unless ARCHITECTURE.md names that arrow among its few allowed ones. Imports inside functions
count (they are dependencies all the same); imports under `if TYPE_CHECKING` do not."""

from __future__ import annotations

import ast
import re

from tests.test_layout import ARCHITECTURE, MODULES, _runtime_imports

ROW = re.compile(r"^\| `([a-z_]+)(?:/|\.py)` \|", flags=re.MULTILINE)
ALLOWED_LINE = re.compile(r"these are the only ones[^:]*:(?P<arrows>[^\n]*(?:\n[^\n]*)?)")
ARROW = re.compile(r"`([a-z_]+)(?:/|\.py)` → `([a-z_]+)(?:/|\.py)`")


def layer_order(text: str) -> list[str]:
    """The table's rows, top to bottom: each a folder or top-level module of `pplan/`."""
    return ROW.findall(text)


def allowed_arrows(text: str) -> set[tuple[str, str]]:
    """The arrows climbing back up that ARCHITECTURE.md names (`a.py` → `b/`)."""
    match = ALLOWED_LINE.search(text)
    return set(ARROW.findall(match.group("arrows"))) if match else set()


def layer_of(module: str) -> str:
    """`pplan.cost.memory` → `cost`; `pplan.explain` → `explain`."""
    return module.split(".")[1]


def import_graph() -> dict[str, set[str]]:
    """Every pplan module and the pplan modules it imports when it runs (top level or inside a function)."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        if name == "pplan" or name == "pplan.__main__":
            continue  # the package's docstring and the entry point: above and below every layer
        targets = _runtime_imports(ast.parse(path.read_text(encoding="utf-8")))
        graph[name] = {t for t in targets if t.startswith("pplan.") and t in MODULES}
    return graph


def arrows_up(graph: dict[str, set[str]], order: list[str]) -> dict[tuple[str, str], list[str]]:
    """Each pair of layers (importer, imported) where the imported row lies below the importer's, with the
    module imports that make it."""
    rank = {name: k for k, name in enumerate(order)}
    out: dict[tuple[str, str], list[str]] = {}
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = layer_of(module), layer_of(target)
            if rank[b] > rank[a]:
                out.setdefault((a, b), []).append(f"{module} -> {target}")
    return out


def test_the_checker_sees_an_arrow_up_and_only_those() -> None:
    order = ["errors", "cost", "cli"]
    graph = {"pplan.cli.x": {"pplan.cost.y", "pplan.errors"}, "pplan.cost.y": {"pplan.errors"}}
    assert arrows_up(graph, order) == {}
    graph["pplan.cost.y"].add("pplan.cli.x")
    assert arrows_up(graph, order) == {("cost", "cli"): ["pplan.cost.y -> pplan.cli.x"]}


def test_the_allowed_arrows_are_read_from_the_text() -> None:
    text = (
        "An import ...; these are the only ones, each into x: `explain.py` → `documents/`,\n`a/` → `b.py`.\n"
    )
    assert allowed_arrows(text) == {("explain", "documents"), ("a", "b")}


def test_every_module_belongs_to_a_row() -> None:
    order = layer_order(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(order) == len(set(order))
    assert {layer_of(m) for m in import_graph()} <= set(order)


def test_no_import_climbs_back_up_but_the_named_ones() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    allowed = allowed_arrows(text)
    found = arrows_up(import_graph(), layer_order(text))
    extra = {pair: found[pair] for pair in found if pair not in allowed}
    assert not extra, f"imports of a lower row of ARCHITECTURE.md's table: {extra}"
    assert len(allowed) <= 2 and set(found) == allowed, (
        f"ARCHITECTURE.md allows {sorted(allowed)}; the code has {sorted(found)}: name only arrows that exist"
    )
