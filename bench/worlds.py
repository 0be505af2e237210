"""Worlds with known true effects, for the optimizer's bench (issue 42).

One place for what a world is, shared by the simulation (bench/optimize_sim.py) and the real runs
it is calibrated against (bench/optimize_world.py): how items' accuracies without edits are drawn,
and what each edit an optimizer writes truly does. The study these come from is
../shared/reference/optimizer-study.md; docs/optimize.md gives the table they produce.

- Items: `n_items` in 22 subtypes (item k in subtype k mod 22). Each item's accuracy without
  edits is drawn per run from a beta mixture: many items nearly always wrong, some nearly always
  right, the rest spread, as a target's per-item accuracies on BabyVision are. `ACCURACY[0.35]`
  has mean .352 (frontier models), `ACCURACY[0.15]` mean .150 (an open 7B model).
- Edits: every candidate edit has a true effect in points, drawn from the world's mixture
  (share none, share harmful uniform on [-8, -1], share helpful uniform on [+1, +10]). It applies
  to every item, or, in a local world, times 3 to the items of 1-3 subtypes drawn for that edit.
  Accepted edits add up: an item's accuracy is its base plus the effects of the edits the skill
  holds, clipped to [0, 1].
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bv.core.power import BABYVISION_ITEMS

SUBTYPES = 22
# (weight, a, b) of each beta component; .35 is what bv optimize --dry-run assumes
ACCURACY: dict[float, tuple[tuple[float, float, float], ...]] = {
    0.35: BABYVISION_ITEMS,
    0.15: ((0.70, 0.3, 6.0), (0.06, 6.0, 0.3), (0.24, 2.0, 5.0)),
}
HARM = (-8.0, -1.0)  # points, uniform
HELP = (1.0, 10.0)


@dataclass(frozen=True)
class World:
    name: str
    about: str
    n_items: int = 388
    accuracy: float = 0.35  # a key of ACCURACY
    none: float = 0.5  # shares of the edits' effects
    harmful: float = 0.3
    helpful: float = 0.2
    local: bool = False  # x3 on 1-3 subtypes instead of every item
    budget: float = 1.0  # times the default budget

    def draw_base(self, rng: np.random.Generator, runs: int) -> np.ndarray:
        """(runs, n_items) accuracies without edits."""
        mix = ACCURACY[self.accuracy]
        weights = np.array([w for w, _, _ in mix])
        component = rng.choice(len(mix), size=(runs, self.n_items), p=weights / weights.sum())
        out = np.empty((runs, self.n_items))
        for k, (_, a, b) in enumerate(mix):
            where = component == k
            out[where] = rng.beta(a, b, size=int(where.sum()))
        return out

    def draw_effects(self, rng: np.random.Generator, runs: int) -> np.ndarray:
        """(runs, n_items) true effects (as shares, not points) of one new edit in each run."""
        u = rng.random(runs)
        points = np.where(
            u < self.none,
            0.0,
            np.where(
                u < self.none + self.harmful,
                rng.uniform(*HARM, size=runs),
                rng.uniform(*HELP, size=runs),
            ),
        )
        effect = np.repeat(points[:, None] / 100, self.n_items, axis=1)
        if self.local:
            subtype = np.arange(self.n_items) % SUBTYPES
            hit = np.zeros((runs, SUBTYPES), dtype=bool)
            count = rng.integers(1, 4, size=runs)
            order = rng.random((runs, SUBTYPES)).argsort(axis=1)
            for k in range(3):
                chosen = order[:, k]
                hit[np.arange(runs), chosen] |= k < count
            effect = np.where(hit[:, subtype], 3 * effect, 0.0)
        return effect


WORLDS: dict[str, World] = {
    w.name: w
    for w in (
        World("W0", "no edit does anything", none=1.0, harmful=0.0, helpful=0.0),
        World("W1", "mixed: 50% none, 30% hurt 1-8, 20% help 1-10 points, on every item"),
        World("W2", "W1's mix on 1-3 subtypes (x3)", local=True),
        World("W3", "pessimistic: 70% none, 25% hurt, 5% help", none=0.7, harmful=0.25, helpful=0.05),
        World("W4", "W1 at accuracy .15", accuracy=0.15),
        World("W5", "W1 with twice the budget", budget=2.0),
        World("W1-120", "W1 on 120 items", n_items=120),
        World("W4-120", "W4 on 120 items", n_items=120, accuracy=0.15),
    )
}
