"""Each setting's default is written once: in its declaration on a typed config
(bv.core.settings.setting), or, for how requests are sent, in bv/engine/defaults.py, which the
declarations and the engine's signatures name. A default written again anywhere in bv/ (a
keyword's default, a dataclass field's, a click option's `default=`) fails here, so two faces can
never drift apart (`jobs=8` was written in 11 places, `timeout=600.0` in 13)."""

from __future__ import annotations

import ast

import pytest
from support.paths import ROOT

from bv.core.settings import declared, default_of
from bv.evaluation.config import EvalConfig
from bv.optimize.results import OptimizeOptions
from bv.optimize.setup import OptimizeSettings
from bv.stages.judge_config import JudgeConfig
from bv.stages.rollout_config import RolloutConfig

CONFIGS = (RolloutConfig, JudgeConfig, EvalConfig, OptimizeOptions, OptimizeSettings)
# Modules whose default of the same name is another setting's, each with why.
KEPT = {
    "bv/cli/data_commands.py": "bv models' --timeout: one listing request's own 30 s",
    "bv/core/paired.py": "a confidence interval's alpha (95%), not bv optimize's false-accept rate",
    "bv/core/power.py": "a test's alpha (5%), not bv optimize's false-accept rate",
}


def declared_defaults() -> dict[str, object]:
    """Each declared setting with a literal default (not None, not a flag's False, not empty)."""
    found: dict[str, object] = {}
    for config in CONFIGS:
        for name in declared(config):
            value = default_of(config, name)
            if isinstance(value, int | float | str) and not isinstance(value, bool) and value != "":
                found[name] = value
    return found


def literal_defaults(tree: ast.AST):
    """(name, literal, line) of every default written in a module: keyword defaults, class-level
    annotated assignments, a click option's `default=` (named by its long flag), a setting()'s."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            for arg, default in pairs:
                if isinstance(default, ast.Constant):
                    yield arg.arg, default.value, default.lineno
        elif isinstance(node, ast.ClassDef):
            for statement in node.body:
                if (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and isinstance(statement.value, ast.Constant)
                ):
                    yield statement.target.id, statement.value.value, statement.lineno
        elif isinstance(node, ast.Call):
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            long = [f[2:].replace("-", "_") for f in flags if f.startswith("--")]
            for keyword in node.keywords:
                if keyword.arg == "default" and isinstance(keyword.value, ast.Constant) and long:
                    yield long[0], keyword.value.value, keyword.value.lineno


def modules():
    for path in sorted((ROOT / "bv").rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def test_no_declared_default_is_written_twice():
    settings = declared_defaults()
    assert {"jobs", "timeout", "retries", "repeats", "backend", "mode"} <= set(settings)
    again = [
        f"{module}:{line}: {name} = {value!r}"
        for module, tree in modules()
        for name, value, line in literal_defaults(tree)
        if name.removesuffix("_s") in settings
        and not isinstance(value, bool)
        and value is not None
        and module not in KEPT
    ]
    assert not again, "defaults written outside their declaration (name the declaration):\n" + "\n".join(
        again
    )


@pytest.mark.parametrize(
    "written",
    ["jobs: int = 8", "def f(timeout: float = 600.0): ...", "x = click.option('--retries', default=5)"],
)
def test_the_scan_finds_a_default_written_again(written):
    """The scan itself: each way of writing a default again is found."""
    tree = ast.parse(f"class C:\n    {written}\n" if ":" in written and "def" not in written else written)
    found = {name for name, _, _ in literal_defaults(tree)}
    assert found & {"jobs", "timeout", "retries"}


def test_a_renamed_flag_still_works_with_a_notice_and_is_not_in_help(sample_dir):
    """One meaning per flag: bv prompt's --seed is --sample-seed (--seed is rollout's sampling
    seed); the old spelling works for one release, said on stderr, and --help shows the new one."""
    from support.commands import bv_inproc

    items = sample_dir / "meta_data.jsonl"
    new = bv_inproc(f"bv prompt {items} --sample 6 --sample-seed 5")
    old = bv_inproc(f"bv prompt {items} --sample 6 --seed 5")
    assert new.returncode == old.returncode == 0 and new.stdout == old.stdout
    assert "notice: --seed is now --sample-seed" in old.stderr and "notice" not in new.stderr
    shown = bv_inproc("bv prompt --help").stdout + bv_inproc("bv optimize --help").stdout
    assert "--sample-seed" in shown and "--batch-size" in shown and "--split-seed" in shown
    assert "  --seed " not in shown and "  --batch " not in shown


@pytest.mark.parametrize(
    ("command", "old", "new"),
    [
        ("bv prompt {items} --sample 6 --seed 3 --sample-seed 5", "--seed", "--sample-seed"),
        ("bv optimize {items} --split-seed=5 --seed 3", "--seed", "--split-seed"),
        ("bv optimize {items} --batch 2 --batch-size 4", "--batch", "--batch-size"),
    ],
)
def test_an_old_and_a_new_spelling_together_are_refused(sample_dir, command, old, new):
    """Both spellings of one renamed flag on one line: refused before any work, naming both
    (the last one silently won)."""
    from support.commands import bv_inproc

    done = bv_inproc(command.format(items=sample_dir / "meta_data.jsonl"))
    assert done.returncode == 2 and done.stdout == ""
    assert f"{old} and {new} are one option" in done.stderr, done.stderr
