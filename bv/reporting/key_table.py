"""The (id, run) pairs `bv report` has seen, one byte each: which rows a column holds and each
one's verdict, all that duplicate checks, comparisons and the paired test need (bv.reporting.tally
keeps one per column; `bv export` one for its duplicate check)."""

from __future__ import annotations

from collections.abc import Iterator

# One byte per (id, run) in a KeyTable: absent, or present with this verdict, plus FAILED when
# the row's rollout failed or it is undecided (a row without a verdict has failed too).
ABSENT, NO_VERDICT, WRONG, RIGHT, FAILED = 0, 1, 2, 3, 4
_CODE = {None: NO_VERDICT, 0: WRONG, 1: RIGHT}
_FAILED_RIGHT, _FAILED_WRONG = RIGHT | FAILED, WRONG | FAILED
# Runs numbered as bv numbers them (0, 1, 2, …) live in a bytearray per item; a run further than
# this beyond an item's array (a hostile or oddly numbered file) goes in a dict instead, so no
# input grows the table by more than twice this many bytes a row.
_REACH = 64


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


def _counted(codes: bytes | bytearray, finished_only: bool) -> tuple[int, int]:
    """(right, counted) among one item's verdict codes."""
    right = codes.count(RIGHT)
    if finished_only:
        return right, right + codes.count(WRONG)
    return right + codes.count(_FAILED_RIGHT), len(codes) - codes.count(ABSENT)
