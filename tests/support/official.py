"""The official evaluation's real outputs, in ../shared beside the project (users' machines lack it)."""

from __future__ import annotations

import pytest

from support.paths import SHARED

OFFICIAL_RESULTS = SHARED / "babyvision" / "official-results"
OFFICIAL_FILES = [OFFICIAL_RESULTS / f"model_results_run_{k}.json" for k in (1, 2, 3)]
needs_official_results = pytest.mark.skipif(
    not all(f.exists() for f in OFFICIAL_FILES),
    reason="the official result files are in ../shared/babyvision/official-results, not on this machine",
)
