"""`bv.api.Report`: what `bv report` shows, as an object over the report's JSON shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from bv.reporting.report_types import Paired, ReportData, Summary


@dataclass(frozen=True)
class Report:
    """What `bv report` shows, as an object. `data` is exactly what `bv report --format json`
    writes; the properties read it: `accuracy` by input name, `paired` for two inputs."""

    data: ReportData = field(repr=False)

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
