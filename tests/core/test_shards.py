"""--shard auto (issue 22): the shard from a SLURM job array's or a Kubernetes Indexed Job's
variables, in processes started with them; the shards split the items by a stable hash of the id
(the same in every process, whatever PYTHONHASHSEED) and `bv merge` of their files equals one run."""

from __future__ import annotations

import hashlib
import json

import pytest
from support.commands import sh

from bv.core.environment import shard_spec
from bv.core.errors import BadConfig
from bv.core.shards import in_shard

VOLATILE = ("latency_s", "started_at", "shard")  # times, and the shard a sharded row records


def stable(rows: list[dict]) -> list[dict]:
    """Rows without what differs between two runs of the same replies (times)."""
    out = []
    for row in rows:
        row = {k: v for k, v in row.items() if k not in VOLATILE}
        row["turns"] = [{k: v for k, v in t.items() if k != "latency_s"} for t in row["turns"]]
        out.append(row)
    return out


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    assert sh(f"bv synth --n 30 --seed 5 --out {folder}/data").returncode == 0
    made = sh(f"bv prompt {folder}/data/meta_data.jsonl > {folder}/prompts.jsonl")
    assert made.returncode == 0, made.stderr
    return folder / "prompts.jsonl"


ROLLOUT = "bv rollout --backend chance --seed 3 --repeats 2 --quiet --no-cache --ordered"


@pytest.mark.parametrize(
    "scheduler",
    [
        # sbatch --array=0-2
        [
            {"SLURM_ARRAY_TASK_ID": str(k), "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0"}
            for k in range(3)
        ],
        # sbatch --array=1-5:2 (tasks 1, 3, 5)
        [
            {
                "SLURM_ARRAY_TASK_ID": str(t),
                "SLURM_ARRAY_TASK_COUNT": "3",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_STEP": "2",
            }
            for t in (1, 3, 5)
        ],
        # a Kubernetes Indexed Job of 3 completions
        [{"JOB_COMPLETION_INDEX": str(k)} for k in range(3)],
    ],
    ids=["slurm", "slurm-step", "kubernetes"],
)
def test_shards_under_the_schedulers_variables_merge_to_one_run(prompts, tmp_path, scheduler):
    whole = sh(f"{ROLLOUT} {prompts} | bv judge --mode rules --quiet > {tmp_path / 'whole.jsonl'}")
    assert whole.returncode == 0, whole.stderr
    spec = "auto/3" if "JOB_COMPLETION_INDEX" in scheduler[0] else "auto"
    parts = []
    for k, variables in enumerate(scheduler):
        part = tmp_path / f"part-{k}.jsonl"
        # each task its own process, with its own hash seed: the split must not depend on it
        env = {**variables, "PYTHONHASHSEED": str(k + 11)}
        made = sh(f"{ROLLOUT} --shard {spec} {prompts} | bv judge --mode rules --quiet > {part}", env=env)
        assert made.returncode == 0, made.stderr
        parts.append([json.loads(line) for line in part.read_text().splitlines()])
        assert {row["shard"] for row in parts[-1]} == {f"{k}/3"}  # each row says which shard it is
    ids = [{row["id"] for row in part} for part in parts]
    assert all(ids) and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])  # a split
    for k, part in enumerate(ids):  # by the SHA-256 of the id, computed here independently
        assert all(int(hashlib.sha256(i.encode()).hexdigest(), 16) % 3 == k for i in part)
    files = " ".join(str(tmp_path / f"part-{k}.jsonl") for k in range(3))
    merged = sh(f"bv merge {files} --sort -o {tmp_path / 'm.jsonl'} --strict")
    assert merged.returncode == 0, merged.stderr
    assert "shards 0-2 of 3" in merged.stderr and "warning" not in merged.stderr
    one = [json.loads(line) for line in (tmp_path / "whole.jsonl").read_text().splitlines()]
    got = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    key = lambda row: (int(row["id"]), row["run"])  # noqa: E731
    assert stable(sorted(got, key=key)) == stable(sorted(one, key=key))
    report = sh(f"bv report {tmp_path / 'whole.jsonl'} --format json").stdout
    assert (
        json.loads(sh(f"bv report {tmp_path / 'm.jsonl'} --format json").stdout)["inputs"][0]["overall"]
        == (json.loads(report)["inputs"][0]["overall"])
    )


def test_auto_without_a_scheduler_or_with_a_bad_one_is_refused(prompts):
    alone = sh(f"{ROLLOUT} --shard auto {prompts}")
    assert alone.returncode == 2 and alone.stdout == ""
    assert "SLURM_ARRAY_TASK_ID" in alone.stderr and "JOB_COMPLETION_INDEX" in alone.stderr
    counted = sh(f"{ROLLOUT} --shard auto {prompts}", env={"JOB_COMPLETION_INDEX": "1"})
    assert counted.returncode == 2 and "auto/N" in counted.stderr
    listed = sh(
        f"{ROLLOUT} --shard auto {prompts}",
        env={"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"},
    )
    assert listed.returncode == 2 and "not one of 3 tasks" in listed.stderr


def test_shard_spec(monkeypatch):
    for name in (
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
        "JOB_COMPLETION_INDEX",
    ):
        monkeypatch.delenv(name, raising=False)
    assert shard_spec("2/5") == (2, 5)
    for bad in ("5/5", "a/b", "auto/0", "²/3", "auto/x", "-1/3"):
        with pytest.raises(BadConfig):
            shard_spec(bad)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "4")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "1")
    assert shard_spec("auto") == (3, 4) and shard_spec("auto/4") == (3, 4)
    with pytest.raises(BadConfig, match="is not SLURM_ARRAY_TASK_COUNT=4"):
        shard_spec("auto/5")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "x")
    with pytest.raises(BadConfig, match="not a whole number"):
        shard_spec("auto")
    assert in_shard("x", (0, 1))


def test_scheduler_variables_are_bounded_and_must_agree(prompts, monkeypatch):
    """Issue 34: a 5,000-digit variable is a bad value (exit 2), not an internal ValueError from
    int(); SLURM and Kubernetes giving different indexes is an error, not SLURM winning; a step of
    0 is refused, not taken as 1."""
    slurm = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0"}
    long = sh(f"{ROLLOUT} --shard auto {prompts}", env={**slurm, "SLURM_ARRAY_TASK_ID": "7" * 5000})
    assert long.returncode == 2 and long.stdout == "", long.stderr
    assert "at most 9 digits" in long.stderr and "Traceback" not in long.stderr
    assert len(long.stderr) < 1000  # the value is not echoed whole
    given = sh(f"{ROLLOUT} --shard {'1' * 5000}/{'9' * 5000} {prompts}")
    assert given.returncode == 2 and "at most 9 digits" in given.stderr and len(given.stderr) < 1000
    both = sh(f"{ROLLOUT} --shard auto {prompts}", env={**slurm, "JOB_COMPLETION_INDEX": "2"})
    assert both.returncode == 2 and "disagree" in both.stderr, both.stderr
    step = sh(f"{ROLLOUT} --shard auto {prompts}", env={**slurm, "SLURM_ARRAY_TASK_STEP": "0"})
    assert step.returncode == 2 and "SLURM_ARRAY_TASK_STEP=0" in step.stderr, step.stderr
    for name, value in {**slurm, "JOB_COMPLETION_INDEX": "1", "SLURM_ARRAY_TASK_STEP": "1"}.items():
        monkeypatch.setenv(name, value)
    assert shard_spec("auto") == (1, 3)  # both set and agreeing is one shard


SLURM = {"SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "1"}


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        # sbatch --array=2, the obvious way to redo task 2 of --array=0-3: ran every item before
        (
            {
                "SLURM_ARRAY_TASK_ID": "2",
                "SLURM_ARRAY_TASK_COUNT": "1",
                "SLURM_ARRAY_TASK_MIN": "2",
                "SLURM_ARRAY_TASK_MAX": "2",
            },
            "SLURM_ARRAY_TASK_COUNT=1",
        ),
        # sbatch --array=1,5,9: task 1 ran as shard 0/3 with exit 0 before
        (
            {
                "SLURM_ARRAY_TASK_ID": "1",
                "SLURM_ARRAY_TASK_COUNT": "3",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_MAX": "9",
            },
            "SLURM_ARRAY_TASK_MAX=9 is not",
        ),
        # sbatch --array=2-3 (a part of --array=0-3 resubmitted)
        (
            {
                "SLURM_ARRAY_TASK_ID": "2",
                "SLURM_ARRAY_TASK_COUNT": "2",
                "SLURM_ARRAY_TASK_MIN": "2",
                "SLURM_ARRAY_TASK_MAX": "3",
            },
            "SLURM_ARRAY_TASK_MIN=2",
        ),
    ],
    ids=["one-task-resubmitted", "list", "part-resubmitted"],
)
def test_an_array_that_is_not_the_whole_range_is_refused(prompts, variables, says):
    made = sh(f"{ROLLOUT} --shard auto {prompts}", env=variables)
    assert made.returncode == 2 and made.stdout == "", made.stderr
    assert says in made.stderr and "scontrol requeue" in made.stderr and "--shard K/N" in made.stderr
    dry = sh(f"{ROLLOUT} --shard auto --dry-run {prompts}", env=variables)
    assert dry.returncode == 2 and says in dry.stderr


def test_a_whole_array_with_its_max_is_taken(prompts):
    env = {
        **SLURM,
        "SLURM_ARRAY_TASK_ID": "3",
        "SLURM_ARRAY_TASK_COUNT": "4",
        "SLURM_ARRAY_TASK_MIN": "1",
        "SLURM_ARRAY_TASK_MAX": "4",
    }  # sbatch --array=1-4
    dry = sh(f"{ROLLOUT} --shard auto --dry-run {prompts}", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "shard:         2/4 (the items whose id hashes to 2 modulo 4)" in dry.stderr + dry.stdout
    loud = sh(f"bv rollout --backend chance --no-cache --shard auto {prompts}", env=env)
    assert loud.returncode == 0 and "rows of shard 2/4" in loud.stderr


@pytest.fixture(scope="module")
def parts(prompts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("parts")
    for k in range(4):
        made = sh(
            f"{ROLLOUT} --shard {k}/4 {prompts} | bv judge --mode rules --quiet > {folder}/part-{k}.jsonl"
        )
        assert made.returncode == 0, made.stderr
    made = sh(f"{ROLLOUT} --shard 0/3 {prompts} | bv judge --mode rules --quiet > {folder}/other-0.jsonl")
    assert made.returncode == 0, made.stderr
    return folder


def test_a_missing_shard_is_said_by_merge_and_report_and_strict_fails(parts, tmp_path):
    three = f"{parts}/part-0.jsonl {parts}/part-1.jsonl {parts}/part-3.jsonl"
    merged = sh(f"bv merge {three} -o {tmp_path / 'm.jsonl'}")
    assert merged.returncode == 0, merged.stderr
    assert "warning: shard 2 of 4 missing (present: 0-1, 3)" in merged.stderr
    assert "shards 0-1, 3 of 4" in merged.stderr
    strict = sh(f"bv merge {three} -o {tmp_path / 's.jsonl'} --strict")
    assert strict.returncode == 1 and not (tmp_path / "s.jsonl").exists()
    assert "error: shard 2 of 4 missing" in strict.stderr
    report = sh(f"bv report {tmp_path / 'm.jsonl'} --format json")
    assert report.returncode == 0 and "shard 2 of 4 missing" in report.stderr
    shards = json.loads(report.stdout)["inputs"][0]["provenance"]["shards"]
    assert shards == {
        "present": {"4": [0, 1, 3]},
        "missing": {"4": [2]},
        "unsharded_rows": 0,
        "unreadable": 0,
    }
    assert sh(f"bv report {tmp_path / 'm.jsonl'} --strict").returncode == 1
    whole = sh(f"bv merge {parts}/part-*.jsonl --strict -o {tmp_path / 'all.jsonl'}")
    assert whole.returncode == 0 and "shards 0-3 of 4" in whole.stderr, whole.stderr
    table = sh(f"bv report {tmp_path / 'all.jsonl'} --strict")
    assert table.returncode == 0 and "shards 0-3 of 4" in table.stdout, table.stderr


def test_mixed_counts_and_unsharded_rows_are_said(parts, prompts, tmp_path):
    mixed = sh(f"bv merge {parts}/part-1.jsonl {parts}/other-0.jsonl --strict > {tmp_path / 'x.jsonl'}")
    assert mixed.returncode == 1 and "shards of different counts" in mixed.stderr
    assert (tmp_path / "x.jsonl").read_text() == ""  # nothing written under --strict
    whole = tmp_path / "whole.jsonl"
    assert sh(f"{ROLLOUT} {prompts} | bv judge --mode rules --quiet > {whole}").returncode == 0
    both = sh(f"bv merge {whole} {parts}/part-2.jsonl > /dev/null")
    assert both.returncode == 0 and "record no shard beside rows of shard 2 of 4" in both.stderr


def test_shard_tally_against_a_count_worked_by_hand():
    from bv.core.shards import ShardTally, problems, ranges

    tally = ShardTally()
    for value in ["0/5", "0/5", "4/5", "2/5", None, "5/5", "x", {"k": 1}, "1/1000000000"]:
        tally.add(value)
    seen = tally.as_json()
    assert seen is not None
    assert seen["present"] == {"5": [0, 2, 4], "1000000000": [1]}
    assert seen["missing"]["5"] == [1, 3] and len(seen["missing"]["1000000000"]) == 1000  # bounded
    assert seen["unsharded_rows"] == 1 and seen["unreadable"] == 3
    lines = problems(seen)
    assert any("shards 1, 3 of 5 missing" in line for line in lines)
    assert any("different counts" in line for line in lines) and any("not K/N" in line for line in lines)
    assert ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8" and ranges([]) == ""
