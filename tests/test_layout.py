"""The folders of `pplan/` are its architecture: ARCHITECTURE.md and the tree name the same folders, the module
import graph has no cycle (so any module imports first without a partial-import failure), and the analytic core
imports no terminal, CLI, rendering or torch code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PPLAN = Path(__file__).resolve().parents[1] / "pplan"
ARCHITECTURE = PPLAN.parent / "ARCHITECTURE.md"
CORE = ("profiles", "model", "plan", "schedules", "cost", "search", "explain", "launchers", "validation")
"""The analytic core: pure functions over validated specs (no files but the catalog's, no terminal, no torch)."""
NOT_IN_CORE = ("typer", "rich", "torch", "pplan.cli", "pplan.render", "pplan.bench")
SHAPE_IMPORTS = {
    "pplan.schedules.actions": ("Kind",),
    "pplan.bench.choices": ("DType", "Mode"),
    "pplan.profiles.hardware_spec": ("HardwareSpec",),
    "pplan.profiles.model_spec": ("ModelSpec",),
    "pplan.docstrings": ("install",),
}
"""What the document shapes (`pplan.documents`) import of pplan beyond each other: the choice types their fields
take, the input profiles `pplan schema` also prints (the registry), and the docstring lookup their base installs."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PPLAN.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PPLAN.rglob("*.py")}


def _runtime_imports(tree: ast.Module) -> list[str]:
    """Modules imported when the module runs: top level and inside functions, not under `if TYPE_CHECKING`."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def top_level_edges(name: str) -> set[str]:
    """pplan modules `name` imports at import time (top level, not inside functions), with the packages each
    import initialises first (importing pplan.a.b runs pplan.a's __init__ first)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in tree.body:
        sub = ast.Module(body=[node], type_ignores=[])
        if isinstance(node, ast.If | ast.Import | ast.ImportFrom | ast.Try):
            for target in _runtime_imports(sub):
                parts = target.split(".")
                for k in range(2, len(parts) + 1):
                    prefix = ".".join(parts[:k])
                    if prefix in MODULES and not (name + ".").startswith(
                        prefix + "."
                    ):  # not its own packages
                        out.add(prefix)
    return out


def test_architecture_names_every_folder_and_only_those() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z_]+)(?:/|\.py)` \|", text, flags=re.MULTILINE))
    present = {p.name for p in PPLAN.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    present |= {p.stem for p in PPLAN.glob("*.py") if not p.stem.startswith("__")}
    assert documented == present


def test_every_package_says_what_it_owns() -> None:
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{name} has no docstring"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (a path that returns to its start), or None: depth-first search."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for name in sorted(graph):
        if name not in state and (found := walk(name)) is not None:
            return found
    return None


def test_find_cycle_sees_cycles_and_only_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_import_graph_has_no_cycle() -> None:
    """A cycle is a module that can fail to import when it is imported first; none exists."""
    cycle = find_cycle({name: top_level_edges(name) for name in MODULES})
    assert cycle is None, " -> ".join(cycle or [])


def test_the_core_imports_no_terminal_cli_rendering_or_torch() -> None:
    for name, path in MODULES.items():
        folder = name.split(".")[1] if name.count(".") else ""
        if folder not in CORE:
            continue
        for target in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            assert not any(target == bad or target.startswith(bad + ".") for bad in NOT_IN_CORE), (
                name,
                target,
            )
            assert target != "pplan.documents.registry", (name, target)  # `pplan schema`'s, not the core's


def test_the_documents_are_shapes_importing_only_each_other_and_their_field_types() -> None:
    """`pplan.documents` holds shapes only: what fills them lives beside its use case (ARCHITECTURE.md)."""
    types = {f"{module}.{name}" for module, names in SHAPE_IMPORTS.items() for name in names}
    allowed = types | set(SHAPE_IMPORTS)
    for name, path in MODULES.items():
        if not name.startswith("pplan.documents"):
            continue
        imports = _runtime_imports(ast.parse(path.read_text(encoding="utf-8")))
        outside = [t for t in imports if t.startswith("pplan") and not t.startswith("pplan.documents")]
        assert set(outside) <= allowed, (name, sorted(set(outside) - allowed))
