"""The (id, run) pairs `bv report` has seen, one byte each: which rows a column holds and each
one's verdict, all that duplicate checks, comparisons and the paired test need (bv.reporting.tally
keeps one per column)."""

from __future__ import annotations

from collections.abc import Iterator

# One byte per (id, run) in a KeyTable: absent, or present with this verdict, plus FAILED when
# the row's rollout failed or it is undecided (a row without a verdict has failed too).
ABSENT, NO_VERDICT, WRONG, RIGHT, FAILED = 0, 1, 2, 3, 4
_CODE = {None: NO_VERDICT, 0: WRONG, 1: RIGHT}
_FAILED_RIGHT, _FAILED_WRONG = RIGHT | FAILED, WRONG | FAILED
_DENSE_RUNS = 1 << 16  # runs 0..65535 live in a bytearray per item; others (rare) in a dict


class KeyTable:
    """The (id, run) pairs of one column, each with its verdict code, in about a byte each."""

    def __init__(self) -> None:
        self._dense: dict[str, bytearray] = {}
        self._sparse: dict[tuple[str, int], int] = {}
        self.size = 0

    def get(self, item: str, run: int) -> int:
        if 0 <= run < _DENSE_RUNS:
            runs = self._dense.get(item)
            return runs[run] if runs is not None and run < len(runs) else ABSENT
        return self._sparse.get((item, run), ABSENT)

    def add(self, item: str, run: int, hard: int | None, failed: bool = False) -> bool:
        """Record (item, run); False when it was there already (a duplicate)."""
        code = _CODE[hard] | FAILED if failed else _CODE[hard]
        if 0 <= run < _DENSE_RUNS:
            runs = self._dense.get(item)
            if runs is None:
                runs = self._dense[item] = bytearray()
            elif run < len(runs) and runs[run]:
                return False
            if run >= len(runs):
                runs.extend(bytes(max(run + 1 - len(runs), len(runs))))
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
