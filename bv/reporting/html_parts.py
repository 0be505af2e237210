"""Parts of the HTML viewer that say how inputs compare and what the page holds, in words and
small tables as the terminal report says them, never as raw JSON."""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

from bv.core.stats import counted
from bv.reporting.html_items import MAX_RUNS, Selection, natural
from bv.reporting.render import paired_sentence
from bv.reporting.report_types import Comparison, Summary


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def comparison_section(comparison: Comparison, shown: set[str]) -> str:
    """The paired comparison as the terminal says it, a 2×2 table, and links to the items that moved."""
    out = ['<h2 id="paired">Paired comparison</h2>']
    pair = comparison.get("paired")
    if pair:
        a, b = _esc(pair["a"]), _esc(pair["b"])
        cells = [
            ("", f"{b} right", f"{b} wrong"),
            (f"{a} right", f"{pair['both_right']}", f"{pair['regressed']} regressed"),
            (f"{a} wrong", f"{pair['improved']} improved", f"{pair['both_wrong']}"),
        ]
        head, *body = cells
        out += [
            f'<p class="cmp">{_esc(paired_sentence(pair))}</p><table class="sum cmp"><thead><tr>',
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
                out.append(f'<p class="moved">{label}: {_moved_links(keys, shown)}</p>')
    left_out = comparison.get("left_out") or {}
    if any(left_out.values()):
        left = ", ".join(f"{name} {n}" for name, n in left_out.items())
        out.append(
            f'<p class="meta">Compared on the {comparison.get("common_items")} items'
            f" ({comparison.get('common_rows')} rows) every input has; rows left out: {_esc(left)}.</p>"
        )
    return "".join(out)


def _moved_links(keys: list[str], shown: set[str], limit: int = 200) -> str:
    """`id#run` keys as links to their cards (plain text for a card not on the page)."""
    links = []
    for key in sorted(keys, key=lambda k: natural(str(k)))[:limit]:
        item, _, run = str(key).rpartition("#")
        text = _esc(f"{item} (run {run})")
        anchor = _esc("item-" + quote(item, safe=""))
        links.append(f'<a href="#{anchor}">{text}</a>' if item in shown else text)
    more = f" … and {len(keys) - limit} more" if len(keys) > limit else ""
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
