"""The top of the HTML viewer: the result at a glance, as inline SVG (no script, nothing fetched).

Per category, each input's accuracy as a bar with its 95% interval over items and a tick at
chance; per category, each input's difference from the baseline with its interval, around zero;
and each input's provenance side by side, differing fields marked. Colours and sizes are SVG
attributes, not style attributes, which the page's Content-Security-Policy refuses.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from bv.core.stats import p_beside, points
from bv.reporting.compare import SIGNIFICANT, provenance_of
from bv.reporting.costs import cost_text, total_cost_text
from bv.reporting.report_types import Comparison, Difference, Figures, Paired, Summary

_COLOURS = ("#3b6fb6", "#d9822b", "#3a9a5b", "#a44a9e", "#8a6d3b", "#5a5a5a")
_LABEL_W, _PLOT_W, _BAR_H, _GAP = 230, 420, 12, 10
_PROVENANCE_ROWS = (
    ("model", "model"),
    ("endpoint", "endpoint"),
    ("skill", "skill"),
    ("style", "prompt style"),
    ("prompts", "replaced prompts"),
    ("params", "sampling parameters"),
    ("judge", "judge"),
    ("judge_version", "judge version"),
    ("bv_version", "bv version"),
    ("dates", "rows made"),
)


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _categories(summary: Summary) -> list[tuple[str, str, Figures]]:
    """(key, label, cell): overall, then each type."""
    return [("", "Overall", summary["overall"])] + [(t, t, c) for t, c in summary["by_type"].items()]


def accuracy_bars(summaries: Sequence[Summary]) -> str:
    """Per category, one bar per input: accuracy, its 95% interval over items, chance."""
    categories = _categories(summaries[0])
    block = len(summaries) * (_BAR_H + 2) + _GAP
    legend = 14 * len(summaries) + 6
    height = legend + len(categories) * block + 18
    x0 = _LABEL_W
    out = [
        f'<svg class="bars" role="img" aria-label="accuracy by category"'
        f' width="{_LABEL_W + _PLOT_W + 60}" height="{height}" font-family="sans-serif" font-size="11">'
    ]
    for i, summary in enumerate(summaries):
        colour = _COLOURS[i % len(_COLOURS)]
        out.append(
            f'<rect x="{x0}" y="{4 + 14 * i}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x0 + 14}" y="{13 + 14 * i}">{_esc(summary["name"])}</text>'
        )
    out.append(
        f'<line x1="{x0 + _PLOT_W}" x2="{x0 + _PLOT_W}" y1="5" y2="14"'
        f' stroke="#c00" stroke-width="2"/><text x="{x0 + _PLOT_W + 4}" y="13">chance</text>'
    )
    for c, (key, label, _) in enumerate(categories):
        top = legend + c * block
        out.append(f'<text x="{x0 - 6}" y="{top + block / 2}" text-anchor="end">{_esc(label[:34])}</text>')
        for i, summary in enumerate(summaries):
            cell = summary["overall"] if not key else summary["by_type"].get(key)
            if cell is None or cell["accuracy"] is None:
                continue
            y = top + i * (_BAR_H + 2)
            colour = _COLOURS[i % len(_COLOURS)]
            width = _PLOT_W * cell["accuracy"]
            out.append(
                f'<rect class="bar" x="{x0}" y="{y}" width="{width:.1f}" height="{_BAR_H}" fill="{colour}"'
                f' fill-opacity="0.75"><title>{_esc(summary["name"])}: {100 * cell["accuracy"]:.1f}%</title>'
                "</rect>"
            )
            ci = cell.get("ci95")
            if ci:
                lo, hi, mid = x0 + _PLOT_W * ci[0], x0 + _PLOT_W * ci[1], y + _BAR_H / 2
                out.append(
                    f'<line class="ci" x1="{lo:.1f}" x2="{hi:.1f}" y1="{mid}" y2="{mid}"'
                    ' stroke="#222" stroke-width="1.5"/>'
                    f'<line x1="{lo:.1f}" x2="{lo:.1f}" y1="{y + 2}" y2="{y + _BAR_H - 2}" stroke="#222"/>'
                    f'<line x1="{hi:.1f}" x2="{hi:.1f}" y1="{y + 2}" y2="{y + _BAR_H - 2}" stroke="#222"/>'
                )
            if cell["chance"] is not None:
                cx = x0 + _PLOT_W * cell["chance"]
                out.append(
                    f'<line class="chance" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y - 1}" y2="{y + _BAR_H + 1}"'
                    f' stroke="#c00" stroke-width="2"/>'
                )
            out.append(
                f'<text x="{x0 + _PLOT_W + 6}" y="{y + _BAR_H - 2}">{100 * cell["accuracy"]:.1f}%</text>'
            )
    axis = height - 14
    out.append(f'<line x1="{x0}" x2="{x0 + _PLOT_W}" y1="{axis}" y2="{axis}" stroke="#888"/>')
    for tick in (0, 25, 50, 75, 100):
        tx = x0 + _PLOT_W * tick / 100
        out.append(
            f'<line x1="{tx}" x2="{tx}" y1="{axis}" y2="{axis + 4}" stroke="#888"/>'
            f'<text x="{tx}" y="{axis + 13}" text-anchor="middle">{tick}%</text>'
        )
    out.append("</svg>")
    return "".join(out)


_SPANS = (0.05, 0.1, 0.2, 0.25, 0.5, 1.0)  # the Δ axis reaches the first that holds every interval


def shared_span(pairs: Sequence[Paired]) -> float:
    """One Δ axis for every comparison of a page (so two plots read alike), in round points."""
    bounds = [
        abs(v) for pair in pairs for d in [pair, *pair["by_type"].values()] if d["ci95"] for v in d["ci95"]
    ]
    widest = max(bounds, default=0.0)
    return next((span for span in _SPANS if widest <= span), 1.0)


def difference_plot(pair: Paired, span: float | None = None) -> str:
    """Per category, the difference from the baseline with its 95% interval, around zero, on an
    axis of ±`span` (the page's shared_span)."""
    rows: list[tuple[str, Difference]] = [("Overall", pair), *pair["by_type"].items()]
    span = span or shared_span([pair])
    height = 16 + len(rows) * 20 + 20
    x0, mid_x = _LABEL_W, _LABEL_W + _PLOT_W / 2

    def x(value: float) -> float:
        return mid_x + value / span * _PLOT_W / 2

    out = [
        f'<svg class="diffplot" role="img" aria-label="difference by category"'
        f' width="{_LABEL_W + _PLOT_W + 160}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<line x1="{mid_x}" x2="{mid_x}" y1="8" y2="{height - 18}" stroke="#888" stroke-dasharray="3,3"/>',
    ]
    for r, (label, diff) in enumerate(rows):
        y = 16 + r * 20
        out.append(f'<text x="{x0 - 6}" y="{y + 4}" text-anchor="end">{_esc(label[:34])}</text>')
        if diff["diff"] is None:
            continue
        significant = diff["p_adjusted"] < SIGNIFICANT
        p_text = p_beside(diff["p_adjusted"], SIGNIFICANT)
        colour = ("#2a7a3a" if diff["diff"] > 0 else "#b22") if significant else "#555"
        if diff["ci95"]:
            lo, hi = x(diff["ci95"][0]), x(diff["ci95"][1])
            out.append(
                f'<line class="ci" x1="{lo:.1f}" x2="{hi:.1f}" y1="{y}" y2="{y}"'
                f' stroke="{colour}" stroke-width="2"/>'
            )
        out.append(
            f'<circle class="point" cx="{x(diff["diff"]):.1f}" cy="{y}" r="4" fill="{colour}">'
            f"<title>{points(diff['diff'])} points, two-sided p = {p_text}</title>"
            "</circle>"
            f'<text x="{x0 + _PLOT_W + 8}" y="{y + 4}">{points(diff["diff"])}'
            + (f" [{points(diff['ci95'][0])}, {points(diff['ci95'][1])}]" if diff["ci95"] else "")
            + f" p={p_text}</text>"
        )
    axis = height - 14
    for tick in (-span, -span / 2, 0.0, span / 2, span):
        out.append(
            f'<text class="tick" x="{x(tick):.1f}" y="{axis + 10}" text-anchor="middle">'
            f"{100 * tick:+.0f}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def provenance_table(summaries: Sequence[Summary], differs: dict[str, list[str]]) -> str:
    """Each input's provenance in a column; rows that differ between inputs marked."""
    made = [provenance_of(s) for s in summaries]
    head = "".join(f"<th>{_esc(s['name'])}</th>" for s in summaries)
    body = []
    for key, label in _PROVENANCE_ROWS:
        values = [m[key] for m in made]
        if not any(values):
            continue
        marked = ' class="differs"' if key in differs else ""
        cells = "".join(f"<td>{_esc(v or '–')}</td>" for v in values)
        body.append(f"<tr{marked}><th>{_esc(label)}</th>{cells}</tr>")
    tokens = "".join(
        f"<td>{s['usage']['prompt_tokens']} + {s['usage']['completion_tokens']}</td>" for s in summaries
    )
    body.append(f"<tr><th>tokens (prompt + completion)</th>{tokens}</tr>")
    if any(s["usage"]["cost_usd"] is not None for s in summaries):
        costs = "".join(
            f"<td>{_esc(cost_text(s['usage']).removeprefix('cost ') or '–')}</td>" for s in summaries
        )
        total = total_cost_text(summaries)
        body.append(f"<tr><th>cost (USD)</th>{costs}</tr>")
        if total:
            body.append(f'<tr><th>total cost</th><td colspan="{len(summaries)}">{_esc(total)}</td></tr>')
    rows = "".join(body)
    return f'<table class="sum prov"><thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody></table>'


def headline(summary: Summary) -> str:
    """A single run's result in one sentence: its accuracy, interval, items, runs and chance."""
    cell = summary["overall"]
    if cell["accuracy"] is None:
        return f"{summary['name']}: no accuracy (no row counted)."
    ci = cell.get("ci95")
    interval = f" (95% CI {100 * ci[0]:.1f}–{100 * ci[1]:.1f})" if ci else ""
    runs = f", {cell['runs']} runs each" if cell["runs"] > 1 else ""
    chance = f"; chance {100 * cell['chance']:.1f}%" if cell["chance"] is not None else ""
    return (
        f"{summary['name']}: accuracy {100 * cell['accuracy']:.1f}%{interval} on {cell['n']} items{runs}"
        f"{chance}."
    )


def overview(summaries: Sequence[Summary], comparison: Comparison | None, notes: Sequence[str] = ()) -> str:
    """The section at the top of the page."""
    pairs = comparison["pairs"] if comparison else []
    out = ['<section id="overview"><h2>Result</h2>']
    out += [f'<p class="verdict">{_esc(pair["verdict"])}.</p>' for pair in pairs]
    if not pairs:
        out.append(f'<p class="verdict headline">{_esc(headline(summaries[0]))}</p>')
    out += [f'<p class="note">{_esc(line)}</p>' for line in notes]
    out.append(f"<h3>Accuracy by category, against chance</h3>{accuracy_bars(summaries)}")
    out.append(
        f'<p class="meta">Bars: accuracy; black: the {_esc(summaries[0]["interval"])}; red tick: chance.</p>'
    )
    adjustment = comparison["adjustment"] if comparison else ""
    span = shared_span(pairs)
    for pair in pairs:
        out.append(
            f"<h3>{_esc(pair['b'])} − {_esc(pair['a'])}, points, by category</h3>"
            f"{difference_plot(pair, span)}"
            f'<p class="meta">Per-item mean difference with its two-sided 95% interval; two-sided p'
            f" adjusted by {_esc(adjustment)}; green or red where p &lt; 0.05.</p>"
        )
    differs = comparison["differs"] if comparison else {}
    out.append(f"<h3>Provenance</h3>{provenance_table(summaries, differs)}</section>")
    return "".join(out)
