"""Result rows tests build (a report's input, worked out by hand) and a row with what differs between
any two runs taken out, to compare runs."""

from __future__ import annotations


def row(i: str, run: int, type_: str, subtype: str, hard: int | None, **extra) -> dict:
    base = {
        "id": i,
        "run": run,
        "type": type_,
        "subtype": subtype,
        "ans_type": "choice",
        "choices": [{"label": "A", "text": "a"}, {"label": "B", "text": "b"}],
        "answer": ["A"],
        "response": "\\boxed{A}" if hard else "\\boxed{B}",
        "error": None,
        "hard": hard,
        "decided_by": "rules",
        "extracted": "A" if hard else "B",
    }
    return {**base, **extra}


def results() -> list[dict]:
    """T/S1: 3 right of 4; T/S2: 1 of 2, one more with a rollout error; U/hostile: 1 of 2, one
    more with a judge error. Every failed row counts wrong: 5 right of 10 overall."""
    return [
        row("1", 0, "T", "S1", 1),
        row("2", 0, "T", "S1", 1),
        row("3", 0, "T", "S1", 1),
        row("4", 0, "T", "S1", 0),
        row("5", 0, "T", "S2", 1),
        row("6", 0, "T", "S2", 0),
        row(
            "7", 0, "T", "S2", None, response=None, error="HTTP 503 (gave up after 6 tries)", decided_by=None
        ),
        row("8", 0, "=cmd|' /C calc'!A0", HOSTILE, 1),
        row("9", 0, "=cmd|' /C calc'!A0", HOSTILE, 0),
        row("10", 0, "=cmd|' /C calc'!A0", HOSTILE, None, decided_by="error", judge_error="judge down"),
    ]


VOLATILE = {"latency_s", "started_at"}  # differ between any two runs, batch or not


def comparable(row: dict) -> dict:
    """A row without what differs between any two runs, and with each turn's cache and batch flags
    apart."""
    kept = {k: v for k, v in row.items() if k not in VOLATILE}
    apart = ("latency_s", "cached", "batch")
    kept["turns"] = [{k: v for k, v in t.items() if k not in apart} for t in row["turns"]]
    return kept


HOSTILE = "[red]x[/red] \x1b[2J|y"  # rich markup, a clear-screen escape, a Markdown column break
