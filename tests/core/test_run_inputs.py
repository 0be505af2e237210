"""A run folder is an input: bv report, bv export and bv merge read a bv eval run folder's
results.jsonl, name it after the run (--label, else the folder) and find its images from its
config.json; bv eval's default folder tells two skills apart."""

from __future__ import annotations

import json

import pytest
from support.commands import sh


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """40 bv synth items and two chance runs of two skills, as a user types them."""
    root = tmp_path_factory.mktemp("walk")
    (root / "v1.md").write_text("# v1\nLook carefully.\n")
    (root / "v2.md").write_text("# v2\nCount twice.\n")
    made = sh(
        "bv synth --out data"
        " && bv eval data/meta_data.jsonl --backend chance --skill v1.md --repeats 2 -o runs/a -q --no-cache"
        " && bv eval data/meta_data.jsonl --backend chance --skill v2.md --repeats 2 -o runs/b -q --no-cache"
        " --seed 5 --label b",
        cwd=root,
    )
    assert made.returncode == 0, made.stderr
    return root


def test_report_names_run_folders_after_their_runs(walk):
    done = sh("bv report runs/a runs/b --baseline a --format markdown", cwd=walk)
    assert done.returncode == 0, done.stderr
    assert "| a % | b % |" in done.stdout, done.stdout
    assert "b vs a:" in done.stdout and "results" not in done.stdout.split("\n")[0], done.stdout
    # NAME=DIR names it as given; a name the runs do not have is refused as before.
    named = sh("bv report v1=runs/a v2=runs/b --baseline v1 --format markdown", cwd=walk)
    assert named.returncode == 0 and "v2 vs v1:" in named.stdout, named.stderr
    assert sh("bv report runs/a runs/b --baseline results", cwd=walk).returncode != 0


def test_label_is_recorded_and_a_rerun_may_change_it(walk):
    config = json.loads((walk / "runs/b/config.json").read_text())
    assert config["options"]["label"] == "b"
    assert json.loads((walk / "runs/a/config.json").read_text())["options"]["label"] is None
    # The run's own report names it so too: its label, else its folder.
    assert "\n- b: model chance" in (walk / "runs/b/report.md").read_text()
    assert "\n- a: model chance" in (walk / "runs/a/report.md").read_text()


def test_html_finds_a_run_folders_images_from_its_config(walk, tmp_path):
    page = tmp_path / "out" / "compare.html"  # elsewhere: not the run folders' nor the items' folder
    done = sh(f"bv report runs/a runs/b --html {page}", cwd=walk)
    assert done.returncode == 0, done.stderr
    assert "not embedded" not in done.stderr, done.stderr
    text = page.read_text()
    assert text.count('class="noimg"') == 0 and "data:image/" in text


def test_export_and_merge_read_run_folders(walk, tmp_path):
    csv = sh("bv export runs/a --format csv", cwd=walk)
    assert csv.returncode == 0, csv.stderr
    assert len(csv.stdout.splitlines()) == 1 + 80  # the header, 40 items x 2 runs
    merged = sh(f"bv merge runs/a -o {tmp_path / 'm.jsonl'}", cwd=walk)
    assert merged.returncode == 0, merged.stderr
    assert (tmp_path / "m.jsonl").read_text() == (walk / "runs/a/results.jsonl").read_text()


def test_folders_that_hold_no_results_are_named_for_what_they_are(walk, tmp_path):
    (tmp_path / "opt").mkdir()
    (tmp_path / "opt" / "run.json").write_text("{}")
    (tmp_path / "plain").mkdir()
    for command in ("bv report", "bv export --format csv", "bv merge"):
        opt = sh(f"{command} {tmp_path / 'opt'}", cwd=walk)
        unfinished = "bv optimize run folder with no test-best.jsonl yet"
        assert opt.returncode == 1 and unfinished in opt.stderr, opt.stderr
        assert "Traceback" not in opt.stderr
        plain = sh(f"{command} {tmp_path / 'plain'}", cwd=walk)
        assert plain.returncode == 1 and "neither a results file nor a bv eval run folder" in plain.stderr


def test_default_folder_tells_two_skills_apart(walk):
    for skill in ("v1.md", "v2.md"):
        done = sh(
            f"bv eval data/meta_data.jsonl --backend chance --skill {skill} --limit 2 -q --no-cache", cwd=walk
        )
        assert done.returncode == 0, done.stderr
    assert (walk / "runs/chance-v1/results.jsonl").is_file() and (
        walk / "runs/chance-v2/results.jsonl"
    ).is_file()


def test_a_run_folder_s_own_files_are_read_bounded_and_its_rows_checked(walk, tmp_path):
    """A config.json nested 200k deep (under the size cap) is not a crash; a bv optimize folder
    whose test-best.jsonl was edited to all-right, its test.json saying otherwise, is an error."""
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "results.jsonl").write_text((walk / "runs/a/results.jsonl").read_text())
    (deep / "config.json").write_text('{"options": ' + "[" * 200_000 + "]" * 200_000 + "}")
    done = sh(f"bv report {deep}", cwd=walk)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    again = sh(f"bv eval data/meta_data.jsonl --backend chance -o {deep} -q --no-cache", cwd=walk)
    assert again.returncode == 1 and "(invalid JSON: nested too deep)" in again.stderr, again.stderr

    rows = [json.loads(line) for line in (walk / "runs/a/results.jsonl").read_text().splitlines()]
    scores: dict[str, list[float]] = {}
    for row in rows:
        scores.setdefault(str(row["id"]), []).append(1.0 if row["hard"] == 1 else 0.0)
    accuracy = sum(sum(s) / len(s) for s in scores.values()) / len(scores)
    opt = tmp_path / "opt"
    opt.mkdir()
    (opt / "run.json").write_text("{}")
    (opt / "test.json").write_text(json.dumps({"best": {"accuracy": accuracy, "n_items": len(scores)}}))
    (opt / "test-best.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    honest = sh(f"bv report {opt}", cwd=walk)
    assert honest.returncode == 0 and "error" not in honest.stderr, honest.stderr

    edited = [{**row, "hard": 1, "pred": row["answer"]} for row in rows]
    (opt / "test-best.jsonl").write_text("".join(json.dumps(row) + "\n" for row in edited))
    report = sh(f"bv report {opt}", cwd=walk)
    assert report.returncode == 1, report.stderr
    assert (
        f"bv report: error: {opt}/test-best.jsonl: its rows give the best skill 100.00% over 40 items"
        in report.stderr
    )
    assert f"{opt}/test.json records {accuracy:.2%} over 40 items" in report.stderr


def test_an_optimize_folder_whose_test_split_did_not_confirm_gives_the_seeds_rows(walk, tmp_path):
    """best.md is then the seed: `bv report FOLDER` reports what the run handed back, never the
    rejected candidate's test rows."""
    rows = [json.loads(line) for line in (walk / "runs/a/results.jsonl").read_text().splitlines()]
    seed = [row for row in rows if row["run"] == 0]
    best = [{**row, "hard": 1} for row in seed]
    opt = tmp_path / "opt"
    opt.mkdir()
    (opt / "run.json").write_text("{}")
    figures = {
        "seed": {"accuracy": sum(r["hard"] for r in seed) / len(seed), "n_items": len(seed)},
        "best": {"accuracy": 1.0, "n_items": len(best)},
    }
    for skill, skill_rows in (("seed", seed), ("best", best)):
        (opt / f"test-{skill}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in skill_rows))
    for handed_back in ("seed", "best"):
        (opt / "test.json").write_text(json.dumps({**figures, "handed_back": {"skill": handed_back}}))
        done = sh(f"bv report {opt} --format json", cwd=walk)
        assert done.returncode == 0, done.stderr
        [run] = json.loads(done.stdout)["inputs"]
        assert run["overall"]["accuracy"] == pytest.approx(figures[handed_back]["accuracy"])
        merged = sh(f"bv merge {opt}", cwd=walk)
        assert merged.stdout == (opt / f"test-{handed_back}.jsonl").read_text()
