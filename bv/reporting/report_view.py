"""`bv.api.Report`: what `bv report` shows, as an object over the report's JSON shape."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from bv.reporting.report_types import Paired, ReportData, Summary


@dataclass(frozen=True)
class Report:
    """What `bv report` shows, as an object. `data` is exactly what `bv report --format json`
    writes; the properties read it: `accuracy` by input name, `paired` for two inputs. `inputs`:
    each input's name and judged rows, for `records` and `to_pandas`. In a notebook it shows as
    the table and verdict `bv report` prints."""

    data: ReportData = field(repr=False)
    inputs: tuple[tuple[str, list[Mapping[str, Any]]], ...] = field(default=(), repr=False, compare=False)

    def __repr__(self) -> str:
        names = ", ".join(s["name"] for s in self.summaries)
        return f"Report({names}: {self.verdict() or 'accuracy ' + str(self.accuracy)})"

    def verdict(self) -> str | None:
        """The paired comparison's verdict in words (two inputs), as the report's first line says it."""
        paired = self.paired
        return str(paired["verdict"]) if paired else None

    def _repr_html_(self) -> str:
        """The report in a notebook: the table and verdict `bv report` prints, escaped."""
        import html

        text = html.escape(self.render("table"))
        return f'<pre class="bv-report" style="white-space: pre; font-size: 12px">{text}</pre>'

    def records(self) -> list[dict[str, Any]]:
        """One record per (input, id, run), in plain columns (bv.reporting.report_frame.COLUMNS:
        `name`, `id`, `run`, `correct`, ...; docs/api.md)."""
        from bv.reporting.report_frame import frame_records

        return frame_records(self.inputs)

    def to_pandas(self) -> Any:
        """`records` as a pandas DataFrame (pandas is imported only here; without it,
        MissingPackage says to install it)."""
        from bv.reporting.report_frame import to_pandas

        return to_pandas(self.records(), "Report")

    @property
    def summaries(self) -> list[Summary]:
        """One summary per input (docs/formats.md: overall, by_type, by_subtype, …)."""
        return list(self.data["inputs"])

    @property
    def accuracy(self) -> dict[str, float]:
        """Avg@k accuracy by input name (never None here: every row counts, and an empty input
        is refused)."""
        return {s["name"]: cast(float, s["overall"]["accuracy"]) for s in self.summaries}

    @property
    def paired(self) -> Paired | None:
        """The paired comparison of two inputs, b against a per item: `diff` with its `ci95`,
        items improved and regressed, `p_value`, `verdict`; None for one input."""
        comparison = self.data["comparison"]
        return comparison.get("paired") if comparison else None

    def render(self, fmt: str = "table") -> str:
        """The report as `bv report --format FMT` prints it: table, markdown, csv or json."""
        import io

        from bv.reporting.render import render_as

        out = io.StringIO()
        render_as(fmt, self.data, out)
        return out.getvalue()
