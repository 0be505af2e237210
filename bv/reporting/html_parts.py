"""Parts of the HTML viewer that say how inputs compare and what the page holds, in words and
small tables as the terminal report says them, never as raw JSON."""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

from bv.core.stats import counted
from bv.reporting.html_items import MAX_RUNS, Selection, natural
from bv.reporting.report_types import Comparison, Summary


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def comparison_section(comparison: Comparison, shown: set[str]) -> str:
    """Each comparison's answer in one line, as the terminal says it, a table of the items that
    moved, and links to them."""
    out = ['<h2 id="paired">Paired comparison</h2>']
    for pair in comparison.get("pairs") or []:
        a, b = _esc(pair["a"]), _esc(pair["b"])
        cells = [
            ("items", "improved", "regressed", "unchanged", "correlation"),
            (
                str(pair["n_items"]),
                f"{pair['improved']} ({b} better)",
                f"{pair['regressed']} ({a} better)",
                str(pair["unchanged"]),
                "–" if pair["correlation"] is None else f"{pair['correlation']:.2f}",
            ),
        ]
        head, *body = cells
        out += [
            f'<p class="cmp">{_esc(pair["verdict"])}.</p><table class="sum cmp"><thead><tr>',
            *(f"<th>{c}</th>" for c in head),
            "</tr></thead><tbody>",
            *("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in body),
            "</tbody></table>",
        ]
        for label, keys in (
            ("Improved", pair.get("improved_ids") or []),
            ("Regressed", pair.get("regressed_ids") or []),
        ):
            if keys:
                out.append(f'<p class="moved">{label} ({b} vs {a}): {_moved_links(keys, shown)}</p>')
    left_out = comparison.get("left_out") or {}
    if any(left_out.values()):
        left = ", ".join(f"{name} {n}" for name, n in left_out.items())
        out.append(
            f'<p class="meta">Compared on the {comparison.get("common_items")} items'
            f" ({comparison.get('common_rows')} rows) every input has; rows left out: {_esc(left)}.</p>"
        )
    return "".join(out)


def _moved_links(items: list[str], shown: set[str], limit: int = 200) -> str:
    """Item ids as links to their cards (plain text for a card not on the page)."""
    links = []
    for item in sorted(items, key=lambda k: natural(str(k)))[:limit]:
        text = _esc(item)
        anchor = _esc("item-" + quote(str(item), safe=""))
        links.append(f'<a href="#{anchor}">{text}</a>' if item in shown else text)
    more = f" … and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(links) + more


def input_facts(summary: Summary) -> str:
    """`40 items, 3 runs, model m; 2 rollout errors, 0 judge errors, 1 undecided`."""
    overall = summary["overall"]
    return (
        f"{counted(overall['n'], 'item')}, {counted(overall['runs'], 'run')},"
        f" model {', '.join(summary.get('models') or ['?'])}; {counted(overall['errors'], 'rollout error')},"
        f" {counted(overall['judge_errors'], 'judge error')}, {overall['undecided']} undecided"
    )


def cap_note(selection: Selection) -> str:
    if not selection.capped:
        return ""
    return (
        f'<p class="note">Showing {len(selection.order)} of {selection.total} items: first those whose'
        " inputs differ, then those with a run that is not right (wrong, failed, judge error or"
        " undecided), then the rest by id. Set BV_HTML_MAX_ITEMS to show more; a card shows at most"
        f" {MAX_RUNS} runs of each input.</p>"
    )
