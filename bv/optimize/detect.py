"""What a run's split can detect, said before it starts (--dry-run, and the run's first lines).

Two things decide whether a good edit reaches best.md: the gate must keep it on the selection
split, and the test split must confirm the skill at the end. Both depend on how many items each
split has and how many runs each item gets. Before any reply, bv assumes items like a frontier
model's on BabyVision (bv.core.power.BABYVISION_ITEMS, 35% accuracy) and an edit that adds the
same points to every item; an edit that helps only a few subtypes needs more.
"""

from __future__ import annotations

from bv.core.power import edit_power, smallest_edit
from bv.optimize.gate import step_alpha

SMALL = 0.10  # an edit this large should be findable: warn below 80% power for it
ASSUMED = (
    "assuming items like a frontier model's on BabyVision (35% accuracy),"
    " an edit adding the same points to every item"
)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def detection_lines(selection: int, test: int, repeats: int, gate: str | None, alpha: float) -> list[str]:
    """The power lines and, when a split is too small to find a +10-point edit, a warning;
    `gate` None: a GEPA search, whose acceptance is its own (only the test split is said)."""
    level = alpha
    runs = f"{repeats} run{'s' if repeats != 1 else ''}"
    smallest = smallest_edit(test, repeats, level)
    at80 = f"80% power from +{100 * smallest:.1f} points" if smallest else "no edit reaches 80% power"
    lines = [
        f"detects: the test split ({test} items x {runs}) confirms a +5-point gain with"
        f" {_pct(edit_power(test, repeats, 0.05, level))} power, +10 with"
        f" {_pct(edit_power(test, repeats, 0.10, level))}; {at80} (one-sided, alpha {level:.3g})",
    ]
    keep = [1.0, 1.0]
    if gate is None:
        pass
    elif gate == "paired":
        first = step_alpha(alpha, 1)
        keep = [edit_power(selection, repeats, d, first) for d in (0.05, 0.10)]
        lines.append(
            f"  the gate on selection ({selection} items x {runs}) keeps a +5-point edit at its first"
            f" decision with {_pct(keep[0])} power, +10 with {_pct(keep[1])} (later decisions: less)"
        )
    else:
        keep = [edit_power(selection, repeats, d, 0.5) for d in (0.05, 0.10)]
        lines.append(
            f"  the gate on selection ({selection} items x {runs}) keeps a +5-point edit in"
            f" {_pct(keep[0])} of steps, +10 in {_pct(keep[1])}, a useless one in 50%"
        )
    lines.append(f"  ({ASSUMED})")
    confirm10 = edit_power(test, repeats, SMALL, level)
    if keep[1] < 0.8 or confirm10 < 0.8:
        where = "selection" if keep[1] < 0.8 else "test"
        size = selection if where == "selection" else test
        lines.append(
            f"warning: the {where} split ({size} items) is too small to find a +10-point edit 80% of"
            " the time: give more items, a larger share with `ratio`, or more `repeats`"
        )
    return lines
