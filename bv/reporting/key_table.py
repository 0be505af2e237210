"""The (id, run) pairs `bv report` has seen, one byte each: which rows a column holds and each
one's verdict, all that duplicate checks, comparisons and the paired test need (bv.reporting.tally
keeps one per column; `bv export` one for its duplicate check)."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping

# One byte per (id, run) in a KeyTable: absent, or present with this verdict, plus FAILED when
# the row's rollout failed or it is undecided (a row without a verdict has failed too).
ABSENT, NO_VERDICT, WRONG, RIGHT, FAILED = 0, 1, 2, 3, 4
_CODE = {None: NO_VERDICT, 0: WRONG, 1: RIGHT}
_FAILED_RIGHT, _FAILED_WRONG = RIGHT | FAILED, WRONG | FAILED
# Runs numbered as bv numbers them (0, 1, 2, …) live in a bytearray per item; a run further than
# this beyond an item's array (a hostile or oddly numbered file) goes in a dict instead, so no
# input grows the table by more than twice this many bytes a row.
_REACH = 64

# What a verdict code counts for, by code (0-7): a row; a row the accuracy counts (every row, or
# with `finished_only` a right or wrong one alone); a right one (RIGHT, also with FAILED unless
# `finished_only`).
_ROW = tuple(int(code != ABSENT) for code in range(8))
_COUNTED = {
    False: _ROW,
    True: tuple(int(code in (WRONG, RIGHT)) for code in range(8)),
}
_RIGHT = {
    False: tuple(int(code & ~FAILED == RIGHT) for code in range(8)),
    True: tuple(int(code == RIGHT) for code in range(8)),
}


class KeyTable:
    """The (id, run) pairs of one column, each with its verdict code, in about a byte each."""

    def __init__(self) -> None:
        self._dense: dict[str, bytearray] = {}
        self._sparse: dict[tuple[str, int], int] = {}
        self.size = 0

    def get(self, item: str, run: int) -> int:
        runs = self._dense.get(item)
        if runs is not None and 0 <= run < len(runs):
            code = runs[run]
            if code or not self._sparse:
                return code
        return self._sparse.get((item, run), ABSENT)

    def add(self, item: str, run: int, hard: int | None = None, failed: bool = False) -> bool:
        """Record (item, run); False when it was there already (a duplicate)."""
        code = _CODE[hard] | FAILED if failed else _CODE[hard]
        runs = self._dense.get(item)
        if runs is None:
            runs = self._dense[item] = bytearray()
        if 0 <= run < len(runs) + _REACH:
            if run < len(runs):
                if runs[run]:
                    return False
            else:
                runs.extend(bytes(max(run + 1 - len(runs), min(len(runs), _REACH))))  # a few runs ahead
            if self._sparse and (item, run) in self._sparse:  # noted before the array reached it
                return False
            runs[run] = code
        else:
            if (item, run) in self._sparse:
                return False
            self._sparse[(item, run)] = code
        self.size += 1
        return True

    def items(self) -> Iterator[tuple[tuple[str, int], int]]:
        """((id, run), code) of every pair present."""
        for item, runs in self._dense.items():
            for run, code in enumerate(runs):
                if code:
                    yield (item, run), code
        yield from self._sparse.items()

    def item_counts(self, finished_only: bool) -> Iterator[tuple[str, int, int]]:
        """(item, right runs, counted runs) per item, in C-speed counts over each item's bytes.

        Every row counts unless `finished_only`, which leaves out failed rows and rows without
        a verdict, as the accuracy does (--exclude-failed)."""
        sparse: dict[str, list[int]] = {}
        for (item, _), code in self._sparse.items():
            sparse.setdefault(item, []).append(code)
        for item, runs in self._dense.items():
            right, counted = _counted(runs, finished_only)
            extra = sparse.pop(item, None)
            if extra:
                more_right, more_counted = _counted(bytes(extra), finished_only)
                right, counted = right + more_right, counted + more_counted
            yield item, right, counted
        for item, codes in sparse.items():
            yield (item, *_counted(bytes(codes), finished_only))

    def run_counts(
        self, slot_of: Mapping[str, int], slots: int, finished_only: bool
    ) -> Iterator[tuple[int, list[int], list[int], list[int]]]:
        """Per run with a row, in run order: (run, rows, counted, right), each a list by slot
        (`slot_of`: item -> slot, a group of items counted together). One run at a time, from the
        table's bytes, so nothing is held per (item, run) but the table itself; each item's array is
        visited only up to its length (items sorted longest first), so the work is the rows'."""
        counted_of, right_of = _COUNTED[finished_only], _RIGHT[finished_only]
        dense = sorted(
            ((runs, slot_of[item]) for item, runs in self._dense.items()), key=lambda pair: -len(pair[0])
        )
        sparse: dict[int, list[tuple[int, int]]] = {}
        for (item, run), code in self._sparse.items():
            sparse.setdefault(run, []).append((slot_of[item], code))
        longest = len(dense[0][0]) if dense else 0
        previous = None
        for run in heapq.merge(range(longest), sorted(sparse)):
            if run == previous:
                continue
            previous = run
            rows, counted, right = [0] * slots, [0] * slots, [0] * slots
            if 0 <= run < longest:
                for runs, slot in dense:
                    if run >= len(runs):
                        break
                    code = runs[run]
                    if code:
                        rows[slot] += 1
                        counted[slot] += counted_of[code]
                        right[slot] += right_of[code]
            for slot, code in sparse.get(run, ()):
                rows[slot] += 1
                counted[slot] += counted_of[code]
                right[slot] += right_of[code]
            if any(rows):
                yield run, rows, counted, right


def _counted(codes: bytes | bytearray, finished_only: bool) -> tuple[int, int]:
    """(right, counted) among one item's verdict codes."""
    right = codes.count(RIGHT)
    if finished_only:
        return right, right + codes.count(WRONG)
    return right + codes.count(_FAILED_RIGHT), len(codes) - codes.count(ABSENT)
