"""`bv report --html`: one self-contained HTML file to read results item by item, offline.

The page holds the summary tables, then one card per item: its image(s), question, choices
with the gold marked, and one line per run (and per input) with the verdict, the extracted
answer, who decided it and the folded response. Vanilla JS filters the cards (wrong only,
differing only, type, subtype, text). Nothing is loaded from outside: images are embedded
once each as small WebP (or JPEG) thumbnails, keyed by content hash, and a Content-Security-
Policy allows only the page's own script and style (by hash) and `data:` images. Every
untrusted string is escaped; the script never writes HTML. The output is deterministic.
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bv import __version__
from bv.core.atomic import atomic_output
from bv.core.errors import StdoutClosed
from bv.core.records import JudgedRow, gold_text
from bv.reporting.compare import notices
from bv.reporting.grid import grid
from bv.reporting.html_items import (
    CardRow,
    ItemCard,
    card_images,
    card_reasoning,
    reply_notes,
    select_items,
    verdict,
)
from bv.reporting.html_items import natural as _natural
from bv.reporting.html_overview import overview
from bv.reporting.html_parts import cap_note, comparison_section, input_facts
from bv.reporting.html_thumbs import Thumbnails
from bv.reporting.report_types import Comparison, ReportData, Summary

VERDICTS = {  # verdict: (label, css class)
    "right": ("✓ right", "ok"),
    "wrong": ("✗ wrong", "bad"),
    "judge_error": ("judge error", "jerr"),
    "undecided": ("undecided", "und"),
    "error": ("rollout error", "bad"),
    "missing": ("no row", "miss"),
}

CSS = """
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:#1d2330;background:#f3f4f7}main{max-width:1180px;margin:0 auto;padding:0 16px 40px}
h1{font-size:20px;margin:18px 0 2px}h2{font-size:16px;margin:22px 0 8px}.meta{color:#5b6475;margin:0}
table.sum{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002;margin:6px 0 10px}
table.sum{max-width:100%}.sum th,.sum td{padding:3px 10px;text-align:right;border-bottom:1px solid #e6e8ee}
.sum td:first-child{white-space:nowrap}.prov td{overflow-wrap:anywhere}
.sum th{background:#eef0f5;font-weight:600}.sum td:first-child,.sum th:first-child{text-align:left}
.sum tr[data-f]{cursor:pointer}.sum tr[data-f]:hover{background:#eef4ff}
.sum .overall td,.sum .type td{font-weight:600}.sum .subtype td:first-child{padding-left:26px}
.sum .ans_type td{color:#6b7385}details.in>summary{cursor:pointer;color:#30508f;margin:4px 0}
p.cmp{font-weight:600;margin:4px 0}.moved{margin:4px 0;color:#3b4352}
.note{background:#fff8e1;border-left:3px solid #e0a800;padding:6px 10px}
#filters{position:sticky;top:0;z-index:2;display:flex;flex-wrap:wrap;gap:8px 16px;align-items:center;
background:#fffe;padding:8px 12px;margin:16px -12px 12px;border-bottom:1px solid #d8dbe3}
#filters select,#filters input[type=search]{font:inherit;padding:2px 6px;max-width:240px}
#count{margin-left:auto;color:#5b6475}
.card{display:grid;grid-template-columns:336px 1fr;gap:4px 18px;background:#fff;border-radius:6px;
box-shadow:0 1px 3px #0002;padding:12px 14px;margin:0 0 12px}.card[hidden]{display:none}
.card>header{grid-column:1/-1;display:flex;flex-wrap:wrap;gap:4px 10px;align-items:baseline}
.card>header a{font-weight:700;color:#1d2330;text-decoration:none}.tag,.who,.why{color:#5b6475}
.score{margin-left:auto;font-weight:600}
.imgs img{display:block;max-width:320px;height:auto;border:1px solid #e3e5ea;margin:0 0 6px}
.noimg{display:flex;align-items:center;justify-content:center;width:320px;height:120px;
border:2px dashed #c9ccd5;color:#8a92a3;background:#fafbfc;margin:0 0 6px;padding:8px;
text-align:center;overflow-wrap:anywhere}
.q{margin:0 0 6px;white-space:pre-wrap}.choices{margin:0 0 6px;padding-left:0;list-style:none}
.choices li{padding:1px 6px;border-radius:3px}.choices li.gold{background:#e2f5e6;font-weight:600}
.gold-line{margin:0 0 8px}.run{border-top:1px solid #eef0f4;padding:4px 0}.run>summary{cursor:pointer}
.v{display:inline-block;min-width:92px;padding:0 6px;border-radius:3px;font-weight:600;
text-align:center;font-size:12px}.ok{background:#d8f3dc;color:#17692c}.bad{background:#fde0e0;color:#a32222}
.jerr{background:#fff1cc;color:#8a5a00}.und{background:#ece6f7;color:#5b3c8f}.miss{background:#eceef2;color:#6b7385}
.diff{background:#ffe7c2;color:#8a4b00;padding:0 6px;border-radius:3px;font-size:12px;font-weight:600}
code{background:#f0f1f5;padding:0 4px;border-radius:3px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f7f8fa;border:1px solid #e6e8ee;padding:8px;
margin:4px 0;max-height:420px;overflow:auto;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
#overview svg{display:block;max-width:100%;height:auto;background:#fff;box-shadow:0 1px 2px #0002;
margin:6px 0}
#overview h3{font-size:14px;margin:14px 0 4px}.verdict{font-weight:600;font-size:15px;margin:6px 0}
.prov tr.differs td,.prov tr.differs th{background:#fff1cc}
@media(max-width:760px){.card{grid-template-columns:1fr}}
"""

# Plain JS that never writes HTML: it sets image sources from the thumbnail map, hides cards
# and sets one text node.
JS = """
(()=>{const $=s=>document.getElementById(s),cards=[...document.querySelectorAll('.card')];
const thumbs=JSON.parse($('bv-thumbs').textContent);
for(const i of document.querySelectorAll('img[data-h]'))i.src=thumbs[i.dataset.h];
const text=cards.map(c=>c.textContent.toLowerCase());
const w=$('f-wrong'),d=$('f-diff'),t=$('f-type'),s=$('f-sub'),q=$('f-q');
function apply(){const n=q.value.trim().toLowerCase();let k=0;
cards.forEach((c,i)=>{const ok=(!w.checked||c.dataset.wrong)&&(!d||!d.checked||c.dataset.diff)
&&(!t.value||c.dataset.type===t.value)&&(!s.value||c.dataset.sub===s.value)&&(!n||text[i].includes(n));
c.hidden=!ok;k+=ok});$('count').textContent=k+' of '+cards.length+' items shown'}
for(const e of document.querySelectorAll('#filters input,#filters select'))e.addEventListener('input',apply);
for(const r of document.querySelectorAll('tr[data-f]'))r.addEventListener('click',()=>{
t.value=r.dataset.f==='type'?r.dataset.v:'';s.value=r.dataset.f==='sub'?r.dataset.v:'';apply();
$('filters').scrollIntoView()});apply()})();
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _summary_table(headers: list[str], rows: list[list[str]], levels: list[str]) -> str:
    out = [
        '<table class="sum"><thead><tr>',
        *(f"<th>{_esc(h)}</th>" for h in headers),
        "</tr></thead><tbody>",
    ]
    for row, level in zip(rows, levels, strict=True):
        filt = {"overall": ' data-f="all"', "type": ' data-f="type"', "subtype": ' data-f="sub"'}.get(
            level, ""
        )
        if filt and level != "overall":
            filt += f' data-v="{_esc(row[0])}"'
        out.append(f'<tr class="{level}"{filt}>' + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>")
    return "".join(out) + "</tbody></table>"


def _run_line(row: CardRow | None, who: str) -> str:
    if row is None:
        label, cls = VERDICTS["missing"]
        who_html = f'<span class="who">{_esc(who)}</span>'
        return f'<div class="run"><span class="v {cls}">{label}</span> {who_html}</div>'
    label, cls = VERDICTS[verdict(row)]
    extracted = row.get("extracted")
    answer = f"<code>{_esc(extracted)}</code>" if extracted else "<i>none</i>"
    answer = r"<i>empty \boxed{}</i>" if extracted == "" else answer
    why = [_esc(x) for x in (row.get("judge_reason"), row.get("judge_error"), row.get("error")) if x]
    why += [_esc(note) for note in reply_notes(row)]
    head = (
        f'<span class="v {cls}">{label}</span> <span class="who">{_esc(who)}</span> answer {answer} · '
        f'<span class="why">{_esc(row.get("decided_by") or "?")}{": " if why else ""}{" — ".join(why)}</span>'
    )
    response = row.get("response")
    body = f"<pre>{_esc(response)}</pre>" if response is not None else "<p><i>no response</i></p>"
    reasoning = card_reasoning(row)
    if reasoning:  # folded: often far longer than the answer
        folded = f"<pre>{_esc(reasoning)}</pre>"
        body = f'<details class="reasoning"><summary>reasoning</summary>{folded}</details>{body}'
    if row.get("judge_reply"):
        body += f"<p>judge {_esc(row.get('judge_model') or '')}:</p><pre>{_esc(row['judge_reply'])}</pre>"
    return f'<details class="run"><summary>{head}</summary>{body}</details>'


def _pictures(row: CardRow, thumbs: Thumbnails) -> str:
    out = []
    for path in card_images(row):
        thumb = thumbs.get(path)
        if path in thumbs.refused:
            why = "image outside the results file's folder (give its folder as the image root, or allow any)"
            out.append(f'<div class="noimg">{why}:<br>{_esc(path)}</div>')
        elif thumb is None:
            out.append(f'<div class="noimg">image missing or unreadable:<br>{_esc(path)}</div>')
        else:
            key, width, height = thumb
            out.append(
                f'<img data-h="{key}" width="{width}" height="{height}" alt="{_esc(Path(path).name)}">'
            )
    return "".join(out) or '<div class="noimg">no image</div>'


def _card(item: ItemCard, names: list[str], thumbs: Thumbnails, differs: bool) -> str:
    """One item: picture, question, choices, gold, then one line per run (runs of two inputs paired)."""
    row, runs = item["row"], item["runs"]
    # Inputs may come from different machines: show the images of the first input that has them all.
    firsts = [runs[i][0] for i in sorted(runs)]
    pictured = next((r for r in firsts if all(thumbs.get(p) for p in card_images(r))), row)
    gold = set(row.get("answer") or [])
    choices = "".join(
        f"<li{' class=gold' if c.get('label') in gold else ''}><b>{_esc(c.get('label'))}.</b> "
        f"{_esc(c.get('text'))}{' ✓ gold' if c.get('label') in gold else ''}</li>"
        for c in row.get("choices") or []
        if isinstance(c, dict)
    )
    run_ids = sorted(
        {r.get("run", 0) for rows in runs.values() for r in rows}, key=lambda x: _natural(str(x))
    )
    lines = []
    for run in run_ids:
        for index, name in enumerate(names):
            who = (f"{name} · " if len(names) > 1 else "") + f"run {run}"
            matching = [r for r in runs.get(index, []) if r.get("run", 0) == run]
            lines += [_run_line(r, who) for r in matching] or [_run_line(None, who)]
    scores, any_wrong = [], False
    for index, name in enumerate(names):
        right, total = item["tally"][index]  # every run, also those not shown
        any_wrong |= right < total
        prefix = f"{name} " if len(names) > 1 else ""
        scores.append(_esc(f"{prefix}{right}/{total} right"))
        if total > len(runs.get(index, [])):
            lines.append(
                f'<p class="why">{_esc(prefix)}{total - len(runs.get(index, []))} more runs not shown</p>'
            )
    kind, sub = _esc(row.get("type", "unknown")), _esc(row.get("subtype", "unknown"))
    attrs = f' data-type="{kind}" data-sub="{sub}"' + (' data-wrong="1"' if any_wrong else "")
    attrs += ' data-diff="1"' if differs else ""
    anchor = _esc("item-" + quote(str(row.get("id")), safe=""))
    cot = row.get("cot")
    return (
        f'<article class="card" id="{anchor}"{attrs}><header><a href="#{anchor}">#{_esc(row.get("id"))}</a>'
        f'<span class="tag">{kind} › {sub} · {_esc(row.get("ans_type", "?"))}</span>'
        + ('<span class="diff">differs</span>' if differs else "")
        + f'<span class="score">{" · ".join(scores)}</span></header>'
        f'<div class="imgs">{_pictures(pictured, thumbs)}</div><div class="body">'
        f'<p class="q">{_esc(row.get("question", ""))}</p>'
        + (f'<ol class="choices">{choices}</ol>' if choices else "")
        + f'<p class="gold-line">gold: <b>{_esc(gold_text(row)) if gold else "?"}</b></p>'
        + (
            f'<details class="run"><summary>reference reasoning</summary><pre>{_esc(cot)}</pre></details>'
            if cot
            else ""
        )
        + f"{''.join(lines)}</div></article>"
    )


def _filters(items: dict[str, ItemCard], n_differing: int | None) -> str:
    subtypes: dict[str, set[str]] = defaultdict(set)
    for item in items.values():
        subtypes[str(item["row"].get("type", "unknown"))].add(str(item["row"].get("subtype", "unknown")))
    types = "".join(f'<option value="{_esc(t)}">{_esc(t)}</option>' for t in sorted(subtypes))
    subs = "".join(
        f'<optgroup label="{_esc(t)}">'
        + "".join(f'<option value="{_esc(s)}">{_esc(s)}</option>' for s in sorted(subtypes[t]))
        + "</optgroup>"
        for t in sorted(subtypes)
    )
    differing = f'<label><input type="checkbox" id="f-diff"> differing only ({n_differing})</label>'
    return (
        '<div id="filters"><label><input type="checkbox" id="f-wrong"> wrong only</label>'
        + (differing if n_differing is not None else "")
        + f'<label>type <select id="f-type"><option value="">all</option>{types}</select></label>'
        f'<label>subtype <select id="f-sub"><option value="">all</option>{subs}</select></label>'
        '<input type="search" id="f-q" placeholder="search text" aria-label="search">'
        '<span id="count"></span></div>'
    )


def _summary(summaries: list[Summary], names: list[str], comparison: Comparison | None) -> str:
    meta = " · ".join(_esc(f"{n}: {input_facts(s)}") for n, s in zip(names, summaries, strict=True))
    report: ReportData = {"inputs": summaries, "comparison": comparison, "power": None}
    top = overview(summaries, comparison, notices(report))
    if len(summaries) == 1:
        return f'<p class="meta">{meta}</p>{top}<h2>Summary</h2>{_summary_table(*grid(summaries[0]))}'
    each = "".join(
        f'<details class="in"><summary>{_esc(n)}</summary>{_summary_table(*grid(s))}</details>'
        for n, s in zip(names, summaries, strict=True)
    )
    return f'<p class="meta">{meta}</p>{top}<h2>Summary</h2>{_summary_table(*grid(report))}{each}'


def write_html(
    path: Path | str,
    summaries: list[Summary],
    rows_by_input: Sequence[Iterable[JudgedRow]],
    comparison: Comparison | None = None,
    image_roots: list[Path] | None = None,
) -> int:
    """Write the viewer for these inputs (`-`: to stdout): `summaries[i]` summarizes `rows_by_input[i]`.

    Judged rows are grouped into one card per item id; with two inputs, rows pair by (id, run)
    and the items whose verdicts differ come first, then those with a failure. Each input is
    iterated twice (bv.reporting.html_items), and at most BV_HTML_MAX_ITEMS cards are kept and written.
    With `image_roots` (one folder per input), only images inside their input's folder are
    embedded, as `bv prompt` confines them; returns how many were not. A file is written
    atomically.
    """
    names = [str(s.get("name", f"input {i + 1}")) for i, s in enumerate(summaries)]
    selection = select_items(rows_by_input)
    items, differs = selection.items, selection.differs
    pair = len(rows_by_input) == 2
    runs = [(i, rows[0]) for item in items.values() for i, rows in item["runs"].items()]
    named = {(p, i) for i, first in runs for p in card_images(first)}
    allowed = {p for p, i in named if image_roots is None or inside(p, image_roots[i])}
    thumbs = Thumbnails(allowed, refused={p for p, _ in named} - allowed)
    data = json.dumps(thumbs.by_hash, separators=(",", ":")).replace("<", "\\u003c")
    csp = f"default-src 'none'; img-src data:; style-src {_csp_hash(CSS)}; script-src {_csp_hash(JS)}"
    title = _esc("bv report: " + ", ".join(names))
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="generator" content="bv {__version__}"><title>{title}</title><style>{CSS}</style>'
        f"</head><body><main><h1>{title}</h1>{_summary(summaries, names, comparison)}"
        + (comparison_section(comparison, set(selection.order)) if comparison else "")
        + f'<h2 id="items">Items</h2>{cap_note(selection)}'
        + _filters(items, len(differs) if pair else None)
    )
    tail = (
        f'</main><script type="application/json" id="bv-thumbs">{data}</script>'
        f"<script>{JS}</script></body></html>\n"
    )
    cards = (_card(items[key], names, thumbs, key in differs) for key in selection.order)
    _write(path, [head], cards, [tail])
    return len(thumbs.refused)


def inside(path: str, root: Path) -> bool:
    """Whether an image path, symlinks resolved, is inside `root` (as `bv prompt` confines images)."""
    try:
        return Path(path).is_absolute() and Path(path).resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def _write(path: Path | str, *parts: Iterable[str]) -> None:
    """Write the page piece by piece (a card at a time): to stdout for `-`, else atomically to
    the file (a full disk leaves the old page whole), its folder made first."""
    if str(path) == "-":
        try:
            for chunk in itertools.chain(*parts):
                sys.stdout.write(chunk)
            sys.stdout.flush()
        except BrokenPipeError:
            raise StdoutClosed() from None
        return
    with atomic_output(Path(path)) as stream:
        for chunk in itertools.chain(*parts):
            stream.write(chunk)
