"""A table of runs as bv.api gives it (`api.runs("runs/")`): what `bv report runs/` prints, shown
in a notebook as that table, and its rows as plain records or a DataFrame."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a table is built: `import bv.api` stays cheap
    from bv.reporting.runs import RunRow, Verdict


@dataclass(frozen=True)
class RunsTable:
    """One row per run (bv.reporting.runs.RunRow) and each finished run's verdict against the
    baseline."""

    rows: tuple[RunRow, ...]
    verdicts: tuple[Verdict, ...]

    def render(self, fmt: str = "table", width: int = 80) -> str:
        """The table as `bv report runs/ --format FMT` writes it (table, markdown, csv, json)."""
        from bv.reporting.runs_render import render_runs

        stream = io.StringIO()
        render_runs(list(self.rows), list(self.verdicts), fmt, stream, width)
        return stream.getvalue()

    def __str__(self) -> str:
        return self.render()

    def _repr_html_(self) -> str:
        """The table in a notebook: the text `bv report runs/` prints, escaped."""
        import html

        text = html.escape(self.render("table", 100))
        return f'<pre class="bv-runs" style="white-space: pre; font-size: 12px">{text}</pre>'

    def records(self) -> list[dict[str, Any]]:
        """One record per run: folder, name, state, model, skill, items_sha256, items, runs,
        accuracy, ci95, interval, errors, cost_usd, stage, problem (docs/api.md)."""
        return [row.as_json() for row in self.rows]

    def to_pandas(self) -> Any:
        """The records as a pandas DataFrame; pandas is not a dependency of bv (MissingPackage
        says to install it)."""
        import importlib

        from bv.core.errors import MissingPackage

        try:
            pandas = importlib.import_module("pandas")
        except ImportError:
            raise MissingPackage("RunsTable.to_pandas needs pandas: pip install pandas") from None
        return pandas.DataFrame.from_records(self.records())
