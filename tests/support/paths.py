"""Where things are, in one place, so a test never counts `parents[N]` from its own folder."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
ROOT = TESTS.parent  # the checkout: bv/, docs/, README.md, setup.cfg
FIXTURES = TESTS / "fixtures"  # data the tests read: recorded replies, batch objects, bad items files
# The official evaluation's real outputs sit in ../shared beside the project (absent on users' machines).
SHARED = ROOT.parent / "shared"
