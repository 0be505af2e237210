"""The layers of bv/ (docs/architecture.md): each subpackage imports only the layers below it,
and no modules import each other in a circle. Read from the source, so a lazy import inside a
function (or under TYPE_CHECKING) counts too, for both checks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.paths import ROOT

BV = ROOT / "bv"

# What each part of bv may import (besides itself and the package face `bv`, which holds only the
# version). core is the bottom; engine, reporting, data and tracking stand on it side by side; stages on
# engine; evaluation (bv eval) and optimize on stages and reporting; bv.api and bv.cli are the two
# faces on top.
ALLOWED = {
    "core": {"core"},
    "engine": {"core", "engine"},
    "reporting": {"core", "reporting"},
    "data": {"core", "data"},
    "tracking": {"core", "tracking"},
    "stages": {"core", "engine", "stages"},
    "evaluation": {"core", "engine", "stages", "reporting", "data", "tracking", "evaluation"},
    "optimize": {"core", "engine", "stages", "reporting", "tracking", "optimize"},
    "api": {"core", "engine", "stages", "reporting", "data", "tracking", "evaluation", "optimize", "api"},
    "cli": {
        "core",
        "engine",
        "stages",
        "reporting",
        "data",
        "tracking",
        "evaluation",
        "optimize",
        "api",
        "cli",
    },
}


def module_name(path: Path) -> str:
    parts = path.relative_to(BV.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str | None:
    """The layer a module of bv belongs to: its subpackage, or `api`; None for the package face."""
    pieces = module.split(".")
    if len(pieces) < 2:
        return None
    return pieces[1] if pieces[1] in ALLOWED else None


def imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("bv")
            and not node.level
        ):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("bv"))
    return found


MODULES = {module_name(p): p for p in sorted(BV.rglob("*.py"))}


def test_every_module_is_in_a_layer():
    loose = [m for m in MODULES if part_of(m) is None and m not in ("bv", "bv.__main__", "bv.prompts")]
    assert not loose, f"modules outside bv's layers (docs/architecture.md): {loose}"


@pytest.mark.parametrize("module", [m for m in MODULES if part_of(m)])
def test_imports_only_lower_layers(module):
    layer = part_of(module)
    assert layer is not None
    upward = sorted(
        target
        for target in imports(MODULES[module])
        if target in MODULES and (part := part_of(target)) is not None and part not in ALLOWED[layer]
    )
    assert not upward, f"{module} ({layer}) imports from a layer above or beside it: {upward}"


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of the import graph, one path per strongly connected group (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


def import_graph(top_level_only: bool = False) -> dict[str, set[str]]:
    return {
        m: {t for t in imports(p, top_level_only=top_level_only) if t in MODULES and t != m}
        for m, p in MODULES.items()
    }


def test_no_import_circles():
    """No circle, counting imports inside functions and under TYPE_CHECKING: a lazy import hides a
    circle from Python, not from a reader (what is shared belongs in the lower module)."""
    assert circles(import_graph()) == []


def test_the_circle_check_sees_lazy_imports(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from bv.core import b\n")
    b.write_text("def f():\n    from bv.core import a\n")
    graph = {"bv.core.a": imports(a), "bv.core.b": imports(b)}
    assert circles({m: {t for t in ts if t in graph} for m, ts in graph.items()}) == [
        ["bv.core.a", "bv.core.b"]
    ]
    graph["bv.core.b"] = imports(b, top_level_only=True)
    assert circles({m: {t for t in ts if t in graph} for m, ts in graph.items()}) == []


def test_the_check_catches_an_upward_import(tmp_path):
    """The layer check is not vacuous: a core module that imports the CLI is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("from bv.cli.app import main\n")
    found = {t for t in imports(bad) if t in MODULES}
    assert "bv.cli.app" in found and part_of("bv.cli.app") not in ALLOWED["core"]


# What ends the process or decides its exit status: only bv/cli may (docs/architecture.md).
PROCESS_ENDERS = {("sys", "exit"), ("os", "_exit"), ("os", "abort")}


def ends_the_process(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in PROCESS_ENDERS:
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id in ("SystemExit", "KeyboardInterrupt"):
                found.append(f"raise {raised.id} (line {node.lineno})")
    return found


@pytest.mark.parametrize("module", [m for m in MODULES if part_of(m) not in ("cli", None)])
def test_only_the_command_line_ends_the_process(module):
    assert not ends_the_process(MODULES[module]), (
        f"{module} ends the process: {ends_the_process(MODULES[module])}"
    )


def test_the_process_check_is_not_vacuous(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os, sys\ndef f():\n    os._exit(1)\n    raise KeyboardInterrupt('x')\n")
    assert sorted(ends_the_process(bad)) == ["os._exit (line 3)", "raise KeyboardInterrupt (line 4)"]


@pytest.mark.parametrize("part", ["engine", "reporting", "core"])
def test_docs_architecture_names_every_module(part):
    """docs/architecture.md's map names each module of the engine, the reporting and the core."""
    text = (BV.parent / "docs" / "architecture.md").read_text()
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    stems = {p.stem for p in (BV / part).rglob("*.py") if p.stem != "__init__"}
    assert sorted(stems - words) == []
