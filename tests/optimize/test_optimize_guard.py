"""What bv optimize hands back (bv.optimize.guard): the best skill only when the untouched test
split confirms it. At the defaults, by simulation with bv's own split, gate and guard: a run
whose edits cannot help hands back a non-seed skill at most alpha of the time, and a +10-point
edit is handed back in at least 80% of runs. The headline says which and why."""

from __future__ import annotations

import random

import scipy.stats as scipy_stats

from bv.core.power import BABYVISION_ITEMS, lift_for_gain
from bv.optimize.budget import planned_steps
from bv.optimize.gate import decide
from bv.optimize.guard import confirm, confirmed, finished, used_up
from bv.optimize.history import current_scores
from bv.optimize.report import test_lines as headline_lines
from bv.optimize.results import OptimizeOptions
from bv.optimize.split import stratified_split

DEFAULTS = OptimizeOptions()


def item_accuracy(rng: random.Random) -> float:
    u = rng.random()
    for weight, a, b in BABYVISION_ITEMS:
        u -= weight
        if u < 0:
            return rng.betavariate(a, b)
    return rng.betavariate(*BABYVISION_ITEMS[-1][1:])


def scores(
    rng: random.Random, accuracy: dict[str, float], ids: list[str], runs: int
) -> dict[str, list[float]]:
    return {i: [float(rng.random() < accuracy[i]) for _ in range(runs)] for i in ids}


def one_run(
    rng: random.Random, lift_of_edit: list[float], items: int = 388, gain: bool = False
) -> tuple[bool, int]:
    """One run at the defaults, with bv's split, step count, gate and guard: the seed scored on
    selection, each step's candidate the current skill plus one edit (its lift on every item:
    lift_of_edit[k], 0 past the list), the current skill scored again and pooled after every
    `refresh` rejections in a row, and at the end the guard on the test split. Returns (handed
    back the best, the number of edits the handed-back skill holds). `gain`: each entry of
    lift_of_edit is the edit's true gain, not its lift."""
    o = DEFAULTS
    split = stratified_split({f"{i}": f"S{i % 22}" for i in range(items)}, o.ratio, rng.randrange(1000))
    base = {f"{i}": item_accuracy(rng) for i in range(items)}
    if gain:
        lift_of_edit = [lift_for_gain([(1.0, p) for p in base.values()], g) for g in lift_of_edit]

    def accuracy(lift: float) -> dict[str, float]:
        return {i: min(1.0, max(0.0, p + lift)) for i, p in base.items()}

    steps = planned_steps(o, len(split.train), len(split.selection), len(split.test))
    lift, edits, rejected = 0.0, 0, 0
    current = scores(rng, accuracy(0.0), split.selection, o.repeats)
    for step in range(1, steps + 1):
        tried = lift + (lift_of_edit[step - 1] if step <= len(lift_of_edit) else 0.0)
        candidate = scores(rng, accuracy(tried), split.selection, o.repeats)
        if decide(current, candidate, o.gate, o.alpha, decision=step).accepted:
            current, lift, edits, rejected = candidate, tried, edits + 1, 0
            continue
        rejected += 1
        if o.refresh and rejected % o.refresh == 0:
            again = scores(rng, accuracy(lift), split.selection, o.repeats)
            current = {i: current[i] + again[i] for i in current}
    if edits == 0:
        return False, 0
    seed_test = scores(rng, accuracy(0.0), split.test, o.repeats)
    best_test = scores(rng, accuracy(lift), split.test, o.repeats)
    verdict = confirm(seed_test, best_test, seed_sha256="seed", best_sha256="best", alpha=o.alpha)
    return confirmed(verdict), edits


def test_a_run_whose_edits_cannot_help_hands_back_the_seed_but_alpha_of_the_time():
    rng = random.Random(42)
    runs = 300
    bad = sum(one_run(rng, [])[0] for _ in range(runs))
    low = scipy_stats.binomtest(bad, runs).proportion_ci(0.95, method="exact").low
    assert low <= DEFAULTS.alpha and bad / runs <= DEFAULTS.alpha, bad


def test_a_ten_point_edit_is_handed_back_in_most_runs():
    """An edit whose true gain is 10 points (the same points added to every item, capped at 100%:
    bv.core.power.lift_for_gain) reaches best.md in at least 80% of runs."""
    rng = random.Random(7)
    runs = 150
    found = sum(one_run(rng, [0.10], gain=True)[0] for _ in range(runs))
    assert found / runs >= 0.8, found


def test_confirming_hands_back_the_best_only_when_the_test_passes():
    seed = {f"{i}": [0.0] for i in range(60)}
    better = {f"{i}": [1.0 if i < 15 else 0.0] for i in range(60)}
    same = {f"{i}": [1.0 if i < 2 else 0.0] for i in range(60)}
    kept = confirm(seed, better, seed_sha256="s", best_sha256="b", alpha=0.05)
    assert kept["handed_back"]["skill"] == "best" and kept["guard"]["alpha"] == 0.05
    low, high = kept["handed_back"]["gain"]["ci95"]
    assert low < 0.25 < high and kept["guard"]["p_value"] == 0.5**15
    refused = confirm(seed, same, seed_sha256="s", best_sha256="b", alpha=0.05)
    assert refused["handed_back"] == {"skill": "seed", "sha256": "s", "why": "no edit was confirmed"}
    assert refused["guard"]["p_value"] == 0.25 and not refused["guard"]["confirmed"]
    nothing = confirm(seed, seed, seed_sha256="s", best_sha256="s", alpha=0.05)
    assert nothing["guard"] is None and nothing["handed_back"]["skill"] == "seed"
    assert finished({**kept, "failed_rows": 0}) and not finished({**kept, "failed_rows": 2})
    assert "a second comparison on the same items" in used_up({**kept, "best": {"sha256": "b" * 64}})


def test_the_headline_says_what_is_handed_back():
    base = {
        "repeats": 1,
        "seed": {"sha256": "a" * 64, "accuracy": 0.3, "ci95": [0.2, 0.4], "n_items": 60},
        "best": {"sha256": "b" * 64, "accuracy": 0.5, "ci95": [0.4, 0.6], "n_items": 60},
        "comparison": {"diff": 0.2, "ci95": [0.1, 0.3], "p_value": 0.001, "improved": 15, "regressed": 3,
                       "unchanged": 42, "method": "m"},
    }  # fmt: skip
    seed = {
        "skill": "best",
        "sha256": "b" * 64,
        "gain": {"estimate": 0.18, "ci95": [0.05, 0.3], "method": "c"},
    }
    guard = {"test": "exact sign-flip test", "alpha": 0.05, "p_value": 0.0007, "confirmed": True}
    lines = headline_lines({**base, "guard": guard, "handed_back": seed}, "step 2")
    assert "exact sign-flip test: p = 0.0007 < alpha 0.05" in lines[3]
    assert lines[4] == "  confirmed: best.md is the best skill; its gain +0.180, 95% CI [0.050, 0.300]"
    refused = {**guard, "p_value": 0.06, "confirmed": False}
    lines = headline_lines({**base, "guard": refused, "handed_back": {"skill": "seed"}}, "step 2")
    assert "p = 0.06 >= alpha 0.05" in lines[3] and lines[4] == "  no edit was confirmed: best.md is the seed"


def _ignoring_target(tmp_path, server):
    """A target whose answers ignore the skill (each item right or wrong by its id) and an
    optimizer that appends a new harmless line every step: nothing it writes can help."""
    import hashlib
    import json

    from support.fakeopenai import Reply
    from support.skillserver import LABELS, SkilledTarget, _image_bytes

    from bv.data.synth import write_sample_set

    write_sample_set(tmp_path / "data", 96, seed=0)
    (tmp_path / "seed.md").write_text("## Inspecting\n\n- Look at the whole picture first.\n")
    items = SkilledTarget(tmp_path / "data").by_image
    asked = [0]

    def respond(seen):
        if seen.body.get("model") == "writer":
            asked[0] += 1
            edit = {"op": "append", "content": f"- Note {asked[0]}: take your time.", "reason": "patience"}
            return Reply(content=json.dumps({"edits": [edit]}))
        item = items[hashlib.sha256(_image_bytes(seen)).digest()]
        right = hashlib.sha256(str(item["taskId"]).encode()).digest()[0] % 3 == 0
        gold = LABELS[item["choiceAns"]] if item["ansType"] == "choice" else item["blankAns"]
        return Reply(
            content=f"\\boxed{{{gold if right else ('Z' if item['ansType'] == 'choice' else '999')}}}"
        )

    server.responder = respond
    return (
        f"bv optimize {tmp_path / 'data' / 'meta_data.jsonl'} --skill {tmp_path / 'seed.md'}"
        f" -m target --base-url {server.base_url} --api-key sk-test-target --optimizer-model writer"
        f" --optimizer-base-url {server.base_url} --mode rules --batch-size 8 --minibatch 8"
        f" --cache {tmp_path / 'c.sqlite'}"
    )


def test_a_run_whose_edits_cannot_help_hands_back_the_seed_as_typed(tmp_path, server):
    """End to end: candidates that change nothing are kept on selection half the time (ties are
    not), but the test split confirms none, so best.md is the seed and the headline says so. The
    finished run is not extended: a second comparison on its test split is refused."""
    import json

    from support.commands import bv_inproc

    base, out = _ignoring_target(tmp_path, server), tmp_path / "run"
    done = bv_inproc(f"{base} --out {out} --steps 4 --refresh 1")
    assert done.returncode == 0, done.stderr
    test = json.loads((out / "test.json").read_text())
    assert test["handed_back"]["skill"] == "seed"
    assert (out / "best.md").read_text() == (tmp_path / "seed.md").read_text()
    assert "handed back: " in done.stdout and "(the seed)" in done.stdout
    if test["guard"]:  # some candidate was kept on selection: it was compared, not confirmed
        assert "no edit was confirmed: best.md is the seed" in done.stdout and not test["guard"]["confirmed"]
    else:
        assert "no edit was accepted" in done.stdout
    assert "detects: the test split (" in done.stderr
    rows = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    # --refresh 1: after each rejection the current skill is scored again on selection, and the
    # next gate pairs the candidate with every run of the current skill since it was set
    rejected = [r for r in rows[1:] if r.get("gate") and not r["accepted"]]
    assert rejected and all(r.get("refresh") for r in rejected)
    assert all(len(runs) == 1 for runs in rejected[0]["refresh"]["scores"].values())
    pooled, _ = current_scores(rows)
    since = 1 + sum(1 for r in rows[rows.index(max(
        (r for r in rows if r["kind"] == "seed" or r.get("accepted")), key=lambda r: r["step"])) + 1:]
        if r.get("refresh"))  # fmt: skip
    assert {len(runs) for runs in pooled.values()} == {since}
    again = bv_inproc(f"{base} --out {out} --steps 6 --refresh 1")
    assert again.returncode == 2 and "this run is finished: its test split" in again.stderr
    assert "start a new run folder (--out)" in again.stderr
    same = bv_inproc(f"{base} --out {out} --steps 4 --refresh 1")  # the same command: its result again
    assert same.returncode == 0 and same.stdout == done.stdout


def test_a_run_folder_s_record_nested_too_deep_is_refused_in_words(tmp_path):
    """A test.json edited to nest 200k deep (issue 43, finding 15's kin) is a message, not a
    RecursionError."""
    import pytest

    from bv.core.errors import BadRecord
    from bv.optimize.rundir import RunFolder

    (tmp_path / "test.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(BadRecord, match=r"test\.json: unreadable"):
        RunFolder(tmp_path).read_json("test.json")


def test_a_history_row_nested_too_deep_is_named_by_its_line(tmp_path):
    import pytest

    from bv.core.errors import BadRecord
    from bv.optimize.rundir import RunFolder

    (tmp_path / "history.jsonl").write_text("[" * 200_000 + "]" * 200_000 + "\n")
    with pytest.raises(BadRecord, match=r"history\.jsonl:1: not a history row"):
        RunFolder(tmp_path).history()
