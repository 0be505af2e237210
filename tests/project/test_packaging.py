"""What a user installs: the sdist, the wheel built from it, installed (not editable) in a fresh venv
outside the checkout (support/installing.py), and every command run from there; the metadata read as
an index reads it.

`make test` runs against an editable install, which finds any module of the checkout whether the
wheel carries it or not: a hand-kept package list once left out bv/evaluation/ and the installed `bv eval`
failed with ModuleNotFoundError while every other test passed."""

from __future__ import annotations

import email.parser
import email.policy
import json
import tarfile
import zipfile

import pytest
from support.commands import jsonl
from support.installing import Dist, Installed, install
from support.paths import ROOT
from support.sources import sample_parquet

PACKAGE_FILES = sorted(
    p.relative_to(ROOT).as_posix() for p in (ROOT / "bv").rglob("*") if p.suffix in (".py", ".typed")
)
PROMPTS = sorted(p.name for p in (ROOT / "prompts").glob("*.md"))
COMMANDS = ["cache", "data", "eval", "export", "import", "judge", "merge", "models", "optimize",
            "prompt", "report", "rollout", "synth", "templates"]  # fmt: skip


@pytest.fixture(scope="module")
def installed(bv_dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install([bv_dist.wheel], tmp_path_factory.mktemp("venv"), tmp_path_factory.mktemp("home"))


def test_the_sdist_carries_the_tree(bv_dist):
    names = {n.partition("/")[2] for n in tarfile.open(bv_dist.sdist).getnames()}
    wanted = {*PACKAGE_FILES, *(f"prompts/{p}" for p in PROMPTS), "README.md", "setup.cfg", "pyproject.toml"}
    assert wanted - names == set()


def test_the_wheel_carries_every_module_prompt_and_the_entry_point(bv_dist):
    archive = zipfile.ZipFile(bv_dist.wheel)
    names = set(archive.namelist())
    assert "bv/evaluation/evaluate.py" in names  # the module the hand-kept list left out
    assert {*PACKAGE_FILES, *(f"bv/prompts/{p}" for p in PROMPTS)} - names == set()
    assert not [n for n in names if n.startswith(("tests/", "prompts/", "bench/"))]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert archive.read(entry_points).decode().split() == ["[console_scripts]", "bv", "=", "bv.cli.app:main"]


def test_the_metadata_as_an_index_reads_it(bv_dist):
    from readme_renderer.markdown import render

    archive = zipfile.ZipFile(bv_dist.wheel)
    text = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    meta = email.parser.Parser(policy=email.policy.compat32).parsestr(text)  # as packaging.metadata does
    assert (meta["Name"], meta["Requires-Python"]) == ("babyvision-bv", ">=3.11")
    extras = {"data", "prices", "xlsx", "gepa", "mlflow", "wandb", "inspect", "docs", "test"}
    assert set(meta.get_all("Provides-Extra")) == extras
    classifiers = meta.get_all("Classifier")
    for wanted in (
        "Programming Language :: Python :: 3.11",
        "License :: OSI Approved :: MIT License",
        "Operating System :: POSIX",
        "Environment :: Console",
        "Typing :: Typed",
    ):
        assert wanted in classifiers
    assert any(c.startswith("Topic :: ") for c in classifiers)
    # twine check's test: the index renders the long description, or shows it as plain text.
    assert meta["Description-Content-Type"] == "text/markdown"
    body = meta.get_payload()
    assert body.strip() == (ROOT / "README.md").read_text(encoding="utf-8").strip()
    html = render(body)
    assert html is not None and "<h1" in html and "<code>" in html


def test_it_runs_from_the_installed_copy_alone(installed):
    where = installed.ok(
        "python -c 'import bv, bv.evaluation.evaluate, bv.prompts, sys;"
        " print(bv.__file__, bv.evaluation.evaluate.__file__, bv.prompts.__file__, sys.prefix)'"
    )
    for path in where.stdout.split():
        assert path.startswith(str(installed.venv)) and not path.startswith(str(ROOT))
    assert installed.ok("python -m bv --version").stdout.startswith("bv, version ")
    assert installed.ok("python -m bv --help").stdout == installed.ok("bv --help").stdout
    listing = installed.ok("bv --help").stdout.partition("Commands:")[2].splitlines()
    assert [line.split()[0] for line in listing if line.startswith("  ") and line[2] != " "] == COMMANDS
    # Every command's help, through the entry point's own function in one interpreter (a process
    # each costs half a second): each module of every command imports from the installed copy.
    lines = [*COMMANDS, "cache list", "cache stats", "cache clear"]
    (installed.home / "helps.py").write_text(
        "import sys\nfrom bv.cli.app import run\n"
        f"sys.exit(max(run([*line.split(), '--help']) for line in {lines!r}))\n"
    )
    helps = installed.ok("python helps.py").stdout
    assert [
        line.removeprefix("Usage: bv ").split(" [")[0]
        for line in helps.splitlines()
        if line.startswith("Usage:")
    ] == lines


def test_eval_report_export_import_from_synth_data(installed):
    installed.ok("bv synth --n 8 --seed 1 --out data")
    done = installed.ok("bv eval data/meta_data.jsonl --backend chance --mode rules --repeats 2 -o run")
    rows = jsonl((installed.home / "run" / "results.jsonl").read_text())
    assert len(rows) == 16 and all(r["decided_by"] == "rules" for r in rows)
    assert (installed.home / "run" / "report.md").exists(), done.stderr
    installed.ok("bv report run/results.jsonl --html page.html")
    assert "<html" in (installed.home / "page.html").read_text()
    installed.ok("bv export run/results.jsonl --format official --out official")
    back = installed.ok("bv import official/model_results_run_*.json --items data/meta_data.jsonl")
    assert len(jsonl(back.stdout)) == 16
    assert installed.ok("bv export run/results.jsonl --format csv").stdout.count("\n") == 17


def test_the_python_api_from_the_installed_copy(installed):
    installed.ok("bv synth --n 6 --seed 2 --out api-data")
    (installed.home / "use_api.py").write_text(
        "import json\nfrom bv import api\n"
        "r = api.evaluate('api-data/meta_data.jsonl', 'api-run', backend='chance', mode='rules',"
        " cache=None)\n"
        "print(json.dumps([r.status, r.row_count, r.accuracy is not None]))\n"
    )
    assert json.loads(installed.ok("python use_api.py").stdout) == [0, 6, True]


def test_optimize_templates_data_models_and_cache(installed, sample_dir, server):
    installed.ok("bv synth --n 48 --seed 3 --out opt-data && printf '# seed\\n' > seed.md")
    plan = installed.ok(
        "bv optimize opt-data/meta_data.jsonl --skill seed.md --out opt-run --backend chance"
        " --optimizer-model o --dry-run"
    )
    assert not (installed.home / "opt-run").exists(), plan.stderr
    listing = installed.ok("bv templates").stdout
    assert all(p.removesuffix(".md") in listing for p in PROMPTS)
    parquet = sample_parquet(sample_dir, installed.home / "hub" / "train-00000-of-00001.parquet")
    installed.ok(f"bv data --from {parquet} --out official-set")
    assert len((installed.home / "official-set" / "meta_data.jsonl").read_text().splitlines()) == 12
    assert installed.ok(f"bv models --base-url {server.base_url}", OPENAI_API_KEY="k").stdout.split() == [
        "fake-model"
    ]
    stats = installed.ok("bv cache stats")
    assert json.loads(stats.stdout) is not None
    installed.ok("bv cache list && bv cache clear --all")
