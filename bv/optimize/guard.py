"""What bv optimize hands back: its best skill only when the untouched test split confirms it.

The loop chooses its best skill on the selection split, so that split's score flatters it. The
test split has not been used by any choice. At the end, bv compares the best skill with the
seed there, item by item, with the exact sign-flip test (bv.core.signflip), one-sided at alpha.
Only when that test confirms the best skill is it handed back (best.md); otherwise the seed is,
with the words "no edit was confirmed". So, whatever the loop did:

- the chance that the handed-back skill is truly worse than the seed is at most alpha, and
- the chance that the run reports an improvement that is not there is at most alpha.

Both hold because the test split is used once: a finished run that is asked for more steps is
refused (bv.optimize.loop), since a second comparison on the same items would be a second try
at the same alpha. The gain of a confirmed skill is given with the conditional interval of
bv.core.selective, which corrects for handing back only skills that passed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bv.core.selective import conditional_gain
from bv.core.signflip import sign_flip_test
from bv.optimize.gate import finite


def confirm(
    seed: Mapping[str, Sequence[float]],
    best: Mapping[str, Sequence[float]],
    *,
    seed_sha256: str,
    best_sha256: str,
    alpha: float,
) -> dict[str, Any]:
    """test.json's `guard` (None when the best skill is the seed: nothing to confirm) and
    `handed_back`, from the two skills' per-item scores on the test split."""
    if best_sha256 == seed_sha256:
        return {
            "guard": None,
            "handed_back": {"skill": "seed", "sha256": seed_sha256, "why": "no edit was accepted"},
        }
    test = sign_flip_test(seed, best, alpha=alpha)
    guard = {
        "test": test.method,
        "alpha": alpha,
        "n_items": test.n_items,
        "moved": test.moved,
        "diff": finite(test.diff),
        "se": finite(test.se),
        "p_value": test.p_value,
        "critical": test.critical,
        "confirmed": test.rejects,
    }
    if not test.rejects or test.critical is None:
        why = "no edit was confirmed"
        return {"guard": guard, "handed_back": {"skill": "seed", "sha256": seed_sha256, "why": why}}
    gain = conditional_gain(test.diff, test.se, test.critical)
    handed = {
        "skill": "best",
        "sha256": best_sha256,
        "gain": {"estimate": gain.estimate, "ci95": list(gain.ci95), "method": gain.method},
    }
    return {"guard": guard, "handed_back": handed}


def confirmed(test: Mapping[str, Any]) -> bool:
    """Whether test.json hands back the best skill (the test split confirmed it)."""
    return (test.get("handed_back") or {}).get("skill") == "best"


def finished(test: Mapping[str, Any] | None) -> bool:
    """Whether test.json holds a finished comparison (no failed row), which used the test split."""
    return test is not None and "handed_back" in test and not test.get("failed_rows")


def used_up(test: Mapping[str, Any]) -> str:
    """Why a finished run may not go on: its test split has answered once."""
    said = "confirmed" if confirmed(test) else "did not confirm"
    sha = str((test.get("best") or {}).get("sha256", ""))[:12]
    return (
        f"this run is finished: its test split {said} skill {sha}, and a second comparison on the"
        " same items would be a second try at the same `alpha`; start a new run folder (`out`)"
        " to go on, with the handed-back skill (best.md) as the seed (`skill`)"
    )
