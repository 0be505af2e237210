"""report.md and report.html of a `bv optimize` run: the headline (seed against best on the
test split, paired per item), the selection score per step with its interval, every edit and
what became of it, tokens by role. Edit texts come from the optimizer (and replies and errors
from servers), so they are bounded and escaped for each format: report.md's through
bv.optimize.mdtext (rendered, they read as the text itself: no raw HTML, link, remote image or
forged fence), report.html's by html.escape."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bv.core.stats import dollars, p_beside
from bv.optimize.edits import quote
from bv.optimize.mdtext import cell as _cell
from bv.optimize.mdtext import fenced as _fenced
from bv.optimize.results import gate_figures
from bv.optimize.rundir import RunFolder
from bv.optimize.split import Split

if TYPE_CHECKING:
    from bv.optimize.results import GepaResult, OptimizeResult


def _f(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _signed(value: Any) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def _ci(pair: Sequence[Any] | None) -> str:
    return "n/a" if not pair or pair[0] is None else f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def _p(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def test_lines(test: Mapping[str, Any], provenance: str) -> list[str]:
    """The final comparison on the test split and what is handed back; `provenance` says where
    the best skill came from."""
    t, c = test, test["comparison"]
    runs = f"{t['repeats']} run{'s' if t['repeats'] != 1 else ''} each"
    s = t["seed"]
    seed = f"  seed  {s['sha256'][:12]}  accuracy {_f(s['accuracy'])} {_ci(s['ci95'])}"
    head = (
        f"test split ({t['seed']['n_items']} items, {runs}; never shown to the optimizer or used to choose):"
    )
    if t["best"]["sha256"] == t["seed"]["sha256"]:
        return [head, seed, f"  no edit was accepted ({provenance}): best.md is the seed"]
    best = (
        f"  best  {t['best']['sha256'][:12]}  accuracy {_f(t['best']['accuracy'])} {_ci(t['best']['ci95'])}"
        f"  ({provenance})"
    )
    moved = f"{c['improved']} items improved, {c['regressed']} regressed, {c['unchanged']} unchanged"
    guard = t.get("guard")
    if not guard:  # a test.json written before the test split confirmed what is handed back
        return [
            head,
            seed,
            best,
            f"  difference {_signed(c['diff'])}, two-sided 95% CI {_ci(c['ci95'])},"
            f" two-sided p = {_p(c['p_value'])}; {moved}",
            f"  ({c['method']})",
        ]
    level = guard["alpha"]
    test_p = f"p = {p_beside(guard['p_value'], level)}"
    said = f"  difference {_signed(c['diff'])} ({moved}); {guard['test']}: {test_p}"
    gain = (t.get("handed_back") or {}).get("gain")
    if not guard["confirmed"] or not gain:
        return [
            head,
            seed,
            best,
            f"{said} >= alpha {level:.3g}",
            "  no edit was confirmed: best.md is the seed",
        ]
    return [
        head,
        seed,
        best,
        f"{said} < alpha {level:.3g}",
        f"  confirmed: best.md is the best skill; its gain {_signed(gain['estimate'])},"
        f" 95% CI {_ci(gain['ci95'])}",
        "  (the gain and its interval are corrected for handing back only a confirmed skill:"
        " docs/optimize.md)",
    ]


def headline(result: OptimizeResult) -> list[str]:
    """The lines the command prints at the end and the report opens with."""
    chosen = result.selection.get("accuracy")
    optimistic = (
        f"; its selection score {_f(chosen)} is optimistic: the skill was chosen on that split"
        if result.accepted and chosen is not None
        else ""
    )
    steps = f"step {result.best_step}, {result.accepted} of {result.steps} steps accepted"
    return test_lines(result.test, steps + optimistic)


def _n(counts: Mapping[str, float], key: str) -> str:
    return str(counts[key]) if key in counts else "n/a"


def cost_cell(counts: Mapping[str, float]) -> str:
    """A role's cost: USD, with how many of its priced rows had no known price; n/a unpriced."""
    if "cost_usd" not in counts:
        return "n/a"
    unknown = int(counts.get("cost_unknown", 0))
    return dollars(counts["cost_usd"]) + (f" (+{unknown} rows unknown)" if unknown else "")


def _token_lines(tokens: Mapping[str, Mapping[str, float]]) -> list[str]:
    lines = [
        "| role | requests | from cache | prompt tokens | completion tokens | cost |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for role, t in tokens.items():
        lines.append(
            f"| {role} | {_n(t, 'requests')} | {_n(t, 'cached')} | {_n(t, 'prompt_tokens')}"
            f" | {_n(t, 'completion_tokens')} | {cost_cell(t)} |"
        )
    lines.append("")
    lines.append(
        "The judge's requests are its LLM verdicts; how many the reply cache gave is not recorded"
        " (n/a). Cost: what each role's replies cost, those the cache gave included (as their"
        " tokens are), at the run's prices; n/a when the run was not priced."
    )
    return lines


def _step_token_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Requests (from the cache) and prompt / completion tokens of each role, per step."""
    lines = [
        "| step | target | judge | optimizer |",
        "|---|---|---|---|",
    ]
    for row in rows:
        cells = []
        for role in ("target", "judge", "optimizer"):
            t = (row.get("tokens") or {}).get(role) or {}
            cached = f" ({t['cached']} cached)" if t.get("cached") else ""
            tokens = f"{t.get('prompt_tokens', 0)} / {t.get('completion_tokens', 0)}"
            cost = f", {cost_cell(t)}" if "cost_usd" in t else ""
            cells.append(f"{t.get('requests', 0)} req{cached}, {tokens}{cost}")
        lines.append(f"| {row.get('step', 'test')} | " + " | ".join(cells) + " |")
    return lines


def markdown(
    result: OptimizeResult, identity: Mapping[str, Any], split: Split, stops: Sequence[Mapping[str, Any]] = ()
) -> str:
    head = [
        f"# bv optimize: {_cell(result.out, 200)}",
        "",
        "## Headline",
        "",
        *_fenced(headline(result)),
        "",
    ]
    steps = [*result.history, result.test]
    return _document(head, result.history, (result.tokens, "whole run", steps), identity, split, stops)


def _grader_lines(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """The warning that candidates addressed the grader or judge, counted, with their steps."""
    flagged = [row for row in history if row.get("addresses_grader")]
    if not flagged:
        return []
    steps = ", ".join(
        f"step {row['step']}" if isinstance(row["step"], int) else row["step"] for row in flagged
    )
    phrases = sorted({phrase for row in flagged for phrase in row["addresses_grader"]})
    return [
        f"**Refused:** {len(flagged)} candidate skill(s) addressed the grader or judge ({steps}:"
        f" {_cell(', '.join(phrases), 200)}) and were not tried: a gain from them could be the judge"
        " obeying the skill, not better answers.",
        "",
    ]


def _document(
    head: list[str],
    history: Sequence[Mapping[str, Any]],
    tokens: tuple[Mapping[str, Mapping[str, float]], str, Sequence[Mapping[str, Any]]],
    identity: Mapping[str, Any],
    split: Split,
    stops: Sequence[Mapping[str, Any]],
) -> str:
    """report.md under its `head`: the steps, the edits, `tokens` (by role, what they cover, the
    rows by step), the run's settings and where it stopped before its end."""
    by_role, covers, by_step = tokens
    out = [*head, "## Steps", ""]
    out += [
        "| step | epoch | train acc | proposed | applied | current (selection) | candidate (selection) "
        "| gate: diff, one-sided bound and p at the decision's share of alpha | decision |",
        "|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for row in history:
        if row["kind"] == "seed":
            s = row["selection"]
            out.append(f"| 0 | | | | | seed {_f(s['accuracy'])} {_ci(s['ci95'])} | | | |")
            continue
        gate, sel = row["gate"], row.get("selection") or {}
        cur, cand = sel.get("current"), sel.get("candidate")
        out.append(
            f"| {row['step']} | {row['epoch']} | {_f(row['train']['accuracy'])} "
            f"| {row['proposed']} | {row['applied']} "
            f"| {_f(cur['accuracy']) + ' ' + _ci(cur['ci95']) if cur else ''} "
            f"| {_f(cand['accuracy']) + ' ' + _ci(cand['ci95']) if cand else ''} "
            f"| {_cell(gate_figures(gate), 400) if gate else ''} "
            f"| {('accepted' if row['accepted'] else 'rejected') if gate else 'no candidate'} |"
        )
    out += ["", *_grader_lines(history)]
    out += [
        "## Edits",
        "",
        "| step | status | op | target | content | why |",
        "|---:|---|---|---|---|---|",
    ]
    for row in history:
        for reflection in row.get("reflections", []):
            if reflection["status"] != "ok":
                out.append(
                    f"| {row['step']} | {reflection['status']} | (reply {reflection['request']}) | | "
                    f"{_cell(reflection.get('reply', ''), 80)} | {_cell(reflection.get('why', ''))} |"
                )
        verdict = "accepted" if row.get("accepted") else "rejected"
        for edit in row.get("edits", []):
            status = f"applied, {verdict}" if edit["status"] == "applied" else edit["status"]
            out.append(
                f"| {row['step']} | {status} | {_cell(edit.get('op', ''))} "
                f"| {_cell(edit.get('target', ''), 80)} "
                f"| {_cell(edit.get('content', edit.get('raw', '')), 120)} | {_cell(edit.get('why', ''))} |"
            )
        tally = row.get("edits_not_recorded")
        if isinstance(tally, dict) and tally:
            counts = ", ".join(f"{_cell(n)} {_cell(status)}" for status, n in list(tally.items())[:20])
            out.append(f"| {row['step']} | not recorded one by one | | | | {counts} |")
    out += ["", f"## Tokens by role ({covers})", "", *_token_lines(by_role), ""]
    out += ["## Tokens by step (requests, prompt / completion tokens)", ""]
    out += [*_step_token_lines(by_step), ""]
    out += [
        "## Run",
        "",
        f"- split: {_cell(split.method, 200)}: {len(split.train)} train, {len(split.selection)} selection,"
        f" {len(split.test)} test items (split.json)",
        f"- target: {_cell(identity['target'], 300)}",
        f"- optimizer: {_cell(identity['optimizer'], 300)}",
        f"- judge: {_cell(identity['judge'], 300)}",
        f"- options: {_cell(identity['options'], 400)}",
        f"- reflection template sha256: {identity['templates']['reflect']}",
        *(f"- stopped before its end after step {s['after_step']}: {_cell(s['why'], 300)}" for s in stops),
        "",
    ]
    return "\n".join(out)


def record_stop(
    folder: RunFolder,
    history: Sequence[Mapping[str, Any]],
    identity: Mapping[str, Any],
    split: Split,
    total: int,
    why: str,
    spent_usd: float | None,
) -> str:
    """A run stopped before its end (Ctrl-C, SIGTERM, the cost limit), said in the history (a
    `stopped` row, which a re-run passes over) and in an incomplete report; where it stopped, in words."""
    done = max(len(history) - 1, 0)
    if not history:
        where = "before the seed skill's selection score was finished"
    else:
        where = f"{done} of {total} steps finished"
        where += "; the test comparison was not" if done == total else ""
    after = len(history) - 1 if history else None
    folder.append_history({"kind": "stopped", "after_step": after, "why": why, "spent_usd": spent_usd})
    write_incomplete(folder, history, identity, split, [why, where])
    return where


def write_incomplete(
    folder: RunFolder,
    history: Sequence[Mapping[str, Any]],
    identity: Mapping[str, Any],
    split: Split,
    why: list[str],
) -> None:
    """report.md and report.html of a run stopped before its end: `why` it stopped and where,
    then the finished steps as a finished run's report shows them; no test comparison."""
    from bv.optimize.results import add_tokens

    lines = ["INCOMPLETE: " + why[0], *why[1:], "re-run the same command to go on: finished steps are kept,"
             " and the reply cache answers every reply already paid for"]  # fmt: skip
    head = [f"# bv optimize: {_cell(folder.path, 200)} (incomplete)", "", "## Incomplete", ""]
    head += [*_fenced([quote(line, 2000) for line in lines]), ""]
    body = _document(
        head, history, (add_tokens(history), "finished steps", history), identity, split, folder.stops()
    )
    folder.write_text("report.md", body)
    chart = "<h2>Selection accuracy per step</h2>" + _svg(history) if history else ""
    folder.write_text("report.html", _page("bv optimize (incomplete)", lines, chart, body))


def _svg(history: Sequence[Mapping[str, Any]]) -> str:
    """Selection accuracy per step: the current skill's (line, with its interval) and each
    candidate's (a dot, green accepted, red rejected)."""
    width, height, pad = 640, 240, 36
    steps = max(1, len(history) - 1)

    def x(step: int) -> float:
        return pad + (width - 2 * pad) * step / steps

    def y(value: float) -> float:
        return height - pad - (height - 2 * pad) * value

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img"'
        ' aria-label="selection accuracy per step">',
        f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" stroke="#999"/>',
        f'<line x1="{pad}" y1="{y(0)}" x2="{pad}" y2="{y(1)}" stroke="#999"/>',
    ]
    for tick in (0.0, 0.5, 1.0):
        parts.append(f'<text x="4" y="{y(tick) + 4:.1f}" font-size="10">{tick:.1f}</text>')
    every = max(1, -(-steps // 10))  # at most about ten step labels
    for step in range(0, steps + 1, every):
        parts.append(
            f'<text class="step" x="{x(step):.1f}" y="{y(0) + 14:.1f}" font-size="10"'
            f' text-anchor="middle">{step}</text>'
        )
    points, current = [], None
    for row in history:
        if row["kind"] == "seed":
            current = row["selection"]
        elif row.get("accepted"):
            current = row["selection"]["candidate"]
        if current and current["accuracy"] is not None:
            px = x(row["step"])
            points.append(f"{px:.1f},{y(current['accuracy']):.1f}")
            lo, hi = current["ci95"]
            if lo is not None:
                parts.append(
                    f'<line x1="{px:.1f}" y1="{y(lo):.1f}" x2="{px:.1f}" y2="{y(hi):.1f}" stroke="#69c"/>'
                )
        candidate = (row.get("selection") or {}).get("candidate")
        if candidate and candidate["accuracy"] is not None:
            colour = "#2a2" if row["accepted"] else "#c22"
            cy = y(candidate["accuracy"])
            parts.append(f'<circle cx="{x(row["step"]):.1f}" cy="{cy:.1f}" r="3" fill="{colour}"/>')
    if points:
        parts.append(f'<polyline fill="none" stroke="#36c" stroke-width="2" points="{" ".join(points)}"/>')
    parts.append(
        f'<text x="{width / 2:.0f}" y="{height - 6}" font-size="11" text-anchor="middle">step</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _page(title: str, head: list[str], chart: str, body: str) -> str:
    """A report page: one file, no scripts; the headline, the Markdown report rendered (its text
    escaped first: bv.reporting.markdown_html), then the chart."""
    from bv.reporting.markdown_html import to_html

    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em}pre{white-space:pre-wrap}"
        "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 8px}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><pre>"
        + html.escape("\n".join(head))
        + '</pre><section class="report">'
        + to_html(body)
        + "</section>"
        + chart
        + "</body></html>\n"
    )


def page(
    result: OptimizeResult, identity: Mapping[str, Any], split: Split, stops: Sequence[Mapping[str, Any]] = ()
) -> str:
    """report.html: the selection score per step as inline SVG, under the headline."""
    chart = (
        "<h2>Selection accuracy per step</h2>"
        + _svg(result.history)
        + "<p>line: the current skill with its 95% interval;"
        " dots: candidates (green accepted, red rejected)</p>"
    )
    return _page("bv optimize", headline(result), chart, markdown(result, identity, split, stops))


def gepa_page(result: GepaResult, identity: Mapping[str, Any]) -> str:
    return _page("bv optimize --search gepa", gepa_lines(result), "", gepa_report(result, identity))


def write_reports(
    folder: RunFolder, result: OptimizeResult, identity: Mapping[str, Any], split: Split
) -> None:
    folder.write_text("report.md", markdown(result, identity, split, folder.stops()))
    folder.write_text("report.html", page(result, identity, split, folder.stops()))


def gepa_lines(result: GepaResult) -> list[str]:
    """What a GEPA search prints at the end: its search, then the test comparison."""
    sel = result.selection["accuracy"]
    return [
        f"GEPA: {result.candidates} skills in its pool from {result.proposals} reflections;"
        f" {result.metric_calls} target rollouts of a budget of {result.budget}",
        *test_lines(
            result.test,
            f"GEPA candidate {result.best_candidate}, selection {_f(sel)}"
            if result.best_candidate
            else "GEPA kept the seed",
        ),
    ]


def gepa_report(result: GepaResult, identity: Mapping[str, Any]) -> str:
    """report.md of a GEPA search: the headline, GEPA's pool, the rewrites bv refused, tokens."""
    search = result.search
    out = [f"# bv optimize --search gepa: {_cell(result.out, 200)}", "", "## Headline", ""]
    out += [*_fenced(gepa_lines(result)), "", "## GEPA's pool (selection score: GEPA's mean over items)", ""]
    flagged = [c for c in search["pool"] if c.get("addresses_grader")]
    out += _grader_lines([{"step": f"candidate {c['index']}", "addresses_grader": c["addresses_grader"]}
                          for c in flagged])  # fmt: skip
    out += ["| candidate | parents | selection | found after rollouts | skill |", "|---:|---|---:|---:|---|"]
    for c in search["pool"]:
        parents = ", ".join(str(p) for p in c["parents"] if p is not None) or "seed"
        out.append(
            f"| {c['index']} | {parents if c['index'] else ''} | {_f(c['selection'])} "
            f"| {c['found_after_metric_calls']} | {_cell(c['file'])} |"
        )
    out += ["", "## Rewrites bv refused before trying them", "", "| status | why | skill |", "|---|---|---|"]
    out += [
        f"| {_cell(r['status'])} | {_cell(r['why'])} | {_cell(r['skill'], 120)} |" for r in search["refused"]
    ]
    problems = [r for r in search["reflections"] if r.get("status") != "ok"]
    out += ["", "## Reflections that proposed nothing", "", "| request | status | why |", "|---|---|---|"]
    out += [
        f"| {_cell(r['request'])} | {_cell(r.get('status'))} | {_cell(r.get('why', ''))} |" for r in problems
    ]
    out += ["", "## Tokens by role (whole run)", "", *_token_lines(result.tokens), ""]
    out += [
        "## Run",
        "",
        f"- target: {_cell(identity['target'], 300)}",
        f"- optimizer: {_cell(identity['optimizer'], 300)}",
        f"- judge: {_cell(identity['judge'], 300)}",
        f"- search: {_cell(identity['search'], 200)}",
        "",
    ]
    return "\n".join(out)
