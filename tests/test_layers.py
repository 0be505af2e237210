"""The layers of bv/ (docs/architecture.md): each subpackage imports only the layers below it,
and no modules import each other in a circle. Read from the source, so a lazy import inside a
function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BV = Path(__file__).resolve().parent.parent / "bv"

# What each part of bv may import (besides itself and the package face `bv`, which holds only the
# version). core is the bottom; engine, reporting and data stand on it side by side; stages on
# engine; runs (bv eval) and optimize on stages and reporting; bv.api and bv.cli are the two faces on top.
ALLOWED = {
    "core": {"core"},
    "engine": {"core", "engine"},
    "reporting": {"core", "reporting"},
    "data": {"core", "data"},
    "stages": {"core", "engine", "stages"},
    "runs": {"core", "engine", "stages", "reporting", "data", "runs"},
    "optimize": {"core", "engine", "stages", "reporting", "optimize"},
    "api": {"core", "engine", "stages", "reporting", "data", "runs", "optimize", "api"},
    "cli": {"core", "engine", "stages", "reporting", "data", "runs", "optimize", "api", "cli"},
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


def test_no_import_circles():
    graph = {
        m: {t for t in imports(p, top_level_only=True) if t in MODULES and t != m} for m, p in MODULES.items()
    }
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                pytest.fail("import circle: " + " -> ".join([*path[path.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


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
