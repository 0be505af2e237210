"""What bv.api's functions take as their commands do: records in memory, or a file (a str or a
Path), or a run folder where `bv report` takes one; anything else a BadConfig in the command's
words, never a bare Python error from deep inside."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bv.core.errors import BadConfig, BadRecord

PathLike = str | Path


def _kind(value: object) -> str:
    return type(value).__name__


def records_of(given: Any, what: str) -> Iterable[Any]:
    """`given` as records: an iterable as it is, a file (a str or a Path) read as the command
    reads it; a mapping or anything else is refused, naming what was expected."""
    if isinstance(given, PathLike):
        return file_rows(given)
    if isinstance(given, Mapping) or not isinstance(given, Iterable):
        raise BadConfig(
            f"{what}: give a JSONL file (a str or a Path) or a list of records, not a {_kind(given)}"
        )
    return given


def path_of(given: Any, what: str) -> Path:
    """A file or folder given as a str or a Path, or a BadConfig naming what was expected."""
    if not isinstance(given, PathLike):
        raise BadConfig(f"`{what}` must be a path (a str or a Path), not a {_kind(given)}", option=what)
    return Path(given)


def file_rows(path: PathLike) -> list[Any]:
    """A JSONL file's records, read as the commands read them (bounded lines); a bad line a
    BadRecord naming the file and line, a missing file a BadConfig naming it."""
    from bv.core.jsonl import Problems, read_json_lines

    if Path(path).is_dir():
        raise BadConfig(f"{path}: a folder, not a JSONL file")

    class Raising(Problems):
        def report(self, where: Any, why: str) -> None:
            raise BadRecord(f"{where}: {why}")

        def cannot_open(self, path: str, exc: OSError) -> None:
            why = (
                "file not found"
                if isinstance(exc, FileNotFoundError)
                else f"cannot open: {exc.strerror or exc}"
            )
            raise BadConfig(f"{path}: {why}")

    return [value for _, value in read_json_lines([str(path)], Raising())]


def checked(records: Iterable[Any], check: Any, what: str) -> list[Any]:
    """Each record through `check`, or a BadRecord naming its index (one that is no mapping too)."""
    return [checked_one(record, check, f"{what} {index}") for index, record in enumerate(records)]


def checked_one(record: Any, check: Any, where: str) -> Any:
    """One record through `check`, or a BadRecord saying `where` (one that is no mapping too)."""
    if not isinstance(record, Mapping):
        raise BadRecord(f"{where}: expected a JSON object (a mapping), got {_kind(record)}")
    try:
        return check(dict(record))
    except BadRecord as exc:
        raise BadRecord(f"{where}: {exc}") from None


def report_inputs(results: Any) -> list[tuple[str, Iterable[Any]]]:
    """`bv report`'s inputs as bv.api is given them: rows, a results file, a run folder (named
    after its run, as the command names it), or several of these by name."""
    if isinstance(results, PathLike):
        name, rows = _one_input(None, results)
        return [(name, rows)]
    if isinstance(results, Mapping):
        if not results:
            raise BadConfig(
                "no inputs: give judged rows, a results file or a run folder, or several by name"
                " ({'v1': rows, 'v2': 'runs/v2'})"
            )
        return [_one_input(str(name), given) for name, given in results.items()]
    return [("results", records_of(results, "results"))]


def _one_input(name: str | None, given: Any) -> tuple[str, Iterable[Any]]:
    from bv.core.run_inputs import run_folder

    if not isinstance(given, PathLike):
        return str(name), records_of(given, f"{name}")
    run = run_folder(str(given))
    if run is not None:
        return name or run.name, file_rows(run.results)
    return name or Path(given).stem, file_rows(given)
