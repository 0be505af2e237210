"""The end of a run: the seed and the best skill on the test split, compared per item, and which
of them is handed back (bv.optimize.guard); test.json holds it. The test split is used once: a
finished comparison is kept, and one of another skill is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bv.core.records import JudgedRow
from bv.core.run_inputs import TEST_ROWS
from bv.optimize.gate import estimate, paired
from bv.optimize.guard import confirm, finished, used_up
from bv.optimize.results import OptimizeError, OptimizeOptions, tokens_of
from bv.optimize.rundir import RunFolder
from bv.stages.prompt import Skill

Evaluate = Callable[[str, Skill, int, str], tuple[list[JudgedRow], dict[str, list[float]], int]]


def final_test(
    folder: RunFolder, seed: Skill, best: Skill, options: OptimizeOptions, evaluate: Evaluate
) -> dict[str, Any]:
    """test.json: kept when it compares this best skill with these repeats and no row failed,
    run again when rows failed. A finished comparison of another skill is not run again."""
    test = folder.read_json("test.json")
    if finished(test) and test.get("best", {}).get("sha256") != best.sha256:
        raise OptimizeError(used_up(test))
    if (
        not finished(test)
        or test.get("repeats") != options.repeats
        or not (folder.path / TEST_ROWS["best"]).is_file()  # a run before the rows were kept
    ):
        test = test_result(folder, seed, best, options, evaluate)
        folder.write_json("test.json", test)
    return dict(test)


def test_result(
    folder: RunFolder, seed: Skill, best: Skill, options: OptimizeOptions, evaluate: Evaluate
) -> dict[str, Any]:
    """The seed and the best skill on the test split, each item `repeats` times, compared per
    item, and which of them is handed back."""
    seed_rows, seed_scores, _ = evaluate("test", seed, options.repeats, "seed on test")
    best_rows, best_scores, _ = (
        (seed_rows, seed_scores, 0)
        if best.text == seed.text
        else evaluate("test", best, options.repeats, "best on test")
    )
    folder.write_rows(TEST_ROWS["seed"], seed_rows)  # what `bv report FOLDER` reads
    folder.write_rows(TEST_ROWS["best"], best_rows)
    verdict = confirm(
        seed_scores, best_scores, seed_sha256=seed.sha256, best_sha256=best.sha256, alpha=options.alpha
    )
    return {
        "seed": {"sha256": seed.sha256, **estimate(seed_scores)},
        "best": {"sha256": best.sha256, **estimate(best_scores)},
        "comparison": paired(seed_scores, best_scores),
        **verdict,
        "repeats": options.repeats,
        "failed_rows": sum(1 for r in [*seed_rows, *best_rows] if r.get("error") or r.get("hard") is None),
        "tokens": tokens_of(seed_rows + (best_rows if best_rows is not seed_rows else []), []),
    }
