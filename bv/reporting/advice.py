"""What `bv report` (and `bv eval`) say beside the figures: what to re-run for the rows that
failed, and the CI gate of --fail-under."""

from __future__ import annotations

from collections.abc import Collection

from bv.reporting.report_types import Summary


def warnings(summaries: list[Summary], by_rules: Collection[str] = ()) -> list[str]:
    """One line per input whose rows did not all finish: how many, and how to fix them. Inputs
    named in `by_rules` were judged by the rules alone on purpose (`mode` rules): their undecided
    rows are the rules' to leave, said by `notes`, not a fault to fix with an LLM judge."""
    lines = []
    for s in summaries:
        cell, fixes = s["overall"], []
        # rows another tool made and judged: their failures are that tool's to re-run
        imported = (s.get("provenance") or {}).get("backends") == ["imported"]
        if cell["errors"] and imported:
            fixes.append(f"{cell['errors']} failed sample(s): re-run them in the tool that made them")
        elif cell["errors"]:
            fixes.append(
                f"{cell['errors']} rollout error(s): re-run bv rollout on the same prompts"
                " (the reply cache replays every finished row), then bv judge"
            )
        if cell["judge_errors"] and imported:
            fixes.append(f"{cell['judge_errors']} judge error(s) of the tool that made them")
        elif cell["judge_errors"]:
            fixes.append(f"{cell['judge_errors']} judge error(s): re-run bv judge on these rows")
        if cell["undecided"] and s["name"] not in by_rules:
            fixes.append(
                f"{cell['undecided']} undecided row(s): configure an LLM judge (a judge model)"
                " and re-run bv judge"
            )
        if fixes:
            counted = (
                "left out of" if s.get("accuracy_over", "").startswith("finished") else "counted wrong in"
            )
            lines.append(f"{s['name']}: {'; '.join(fixes)} (they are {counted} the accuracy)")
    return lines


def notes(summaries: list[Summary], by_rules: Collection[str]) -> list[str]:
    """What is said, not warned, of an input judged by the rules alone: its undecided rows."""
    return [
        f"{s['name']}: {s['overall']['undecided']} undecided row(s), which a judge of rules alone (mode"
        " rules) cannot decide, are counted wrong in the accuracy"
        for s in summaries
        if s["name"] in by_rules and s["overall"]["undecided"]
    ]


def below(summaries: list[Summary], threshold: float) -> list[str]:
    """What a CI gate says of each input whose overall accuracy is below `threshold`
    (a fraction, or a percentage when above 1)."""
    fraction = threshold / 100 if threshold > 1 else threshold
    return [
        f"{s['name']}: overall accuracy {s['overall']['accuracy']} is below `fail_under` {fraction:g}"
        for s in summaries
        if (s["overall"]["accuracy"] or 0.0) < fraction
    ]
