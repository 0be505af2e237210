"""How many steps a run of bv optimize takes.

By default a run is sized by its budget of target rollouts (`budget`): the seed's selection
score, the test comparison at the end and, between them, as many steps as fit. A step costs its
train batch and the candidate's selection score, plus a share of a re-score of the current skill
(one every `refresh` steps at most, so the run stays within its budget whatever the gate
decides). `steps`, or else `epochs` (passes over the train split), set the count instead. The
count is known before the run starts, so the progress and --dry-run can say it.
"""

from __future__ import annotations

import math

from bv.optimize.results import OptimizeOptions


def planned_steps(options: OptimizeOptions, train: int, selection: int, test: int) -> int:
    """The run's step count from its settings and the split's sizes."""
    if options.steps is not None:
        return options.steps
    if options.epochs is not None:
        return options.epochs * math.ceil(train / options.batch_size)
    scored = selection * options.repeats
    reserve = scored / options.refresh if options.refresh else 0.0
    left = options.budget - scored - 2 * test * options.repeats
    per_step = min(options.batch_size, train) + scored + reserve
    return max(0, math.floor(left / per_step)) if per_step > 0 else 0


def refreshes(options: OptimizeOptions, steps: int) -> int:
    """The most re-scores of the current skill `steps` steps can hold (one per `refresh` rejections)."""
    return steps // options.refresh if options.refresh else 0
