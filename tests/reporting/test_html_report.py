"""`bv report --html`: the self-contained viewer (bv.reporting.html_page), in Python and in
headless Chromium."""

from __future__ import annotations

import json
import random
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.browser import Browser, find_chromium
from support.commands import BIN, bv_inproc, jsonl
from support.paths import ROOT

from bv.data.synth import write_sample_set
from bv.reporting.html_page import write_html
from bv.reporting.report import build_report, summarize


class Tags(HTMLParser):
    """Every start tag of a page, with its attributes."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def find(self, tag: str, cls: str | None = None) -> list[dict[str, str | None]]:
        return [
            a for t, a in self.tags if t == tag and (cls is None or cls in (a.get("class") or "").split())
        ]


def render(tmp_path: Path, *inputs: list[dict], name: str = "out.html", comparison=None, names=None) -> str:
    names = names or [f"in{i}" for i in range(len(inputs))]
    summaries = [summarize(rows, name=n) for rows, n in zip(inputs, names, strict=True)]
    write_html(tmp_path / name, summaries, list(inputs), comparison)
    return (tmp_path / name).read_text(encoding="utf-8")


def thumbs(page: str) -> dict[str, str]:
    return json.loads(re.search(r'<script type="application/json" id="bv-thumbs">(.*?)</script>', page)[1])


def card_ids(page: str) -> list[str]:
    return [a["id"] for a in Tags(page).find("article", "card")]


def row(item_id: str, image: Path | str, run: int = 0, hard: int | None = 1, **extra) -> dict:
    """A judged row as `bv judge` writes it (the fields the viewer reads)."""
    url = Path(image).as_uri() if Path(image).is_absolute() else None
    content = [{"type": "text", "text": "## Question"}]
    content += [{"type": "image_url", "image_url": {"url": url}}] if url else []
    return {
        "id": item_id,
        "question": f"Which one is item {item_id}?",
        "ans_type": "choice",
        "choices": [{"label": "A", "text": "first"}, {"label": "B", "text": "second"}],
        "answer": ["B"],
        "type": "Visual Tracking",
        "subtype": "Connect the lines",
        "images": [str(image) if url is None else f"images/{Path(image).name}"],
        "messages": [{"role": "system", "content": "..."}, {"role": "user", "content": content}],
        "run": run,
        "model": "fake-vl",
        "response": "I think so.\n\n\\boxed{B}" if hard else "\\boxed{A}",
        "error": None,
        "extracted": "B" if hard else "A",
        "hard": hard,
        "decided_by": "rules" if hard is not None else "error",
        "undecided": False,
        "judge_reason": "label B is the gold B" if hard else "label A, gold is B",
        **extra,
    }


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, list[dict]]:
    """`bv synth --n 24`, rolled out twice with the chance baseline and judged by rules."""
    tmp = tmp_path_factory.mktemp("html")
    result = bv_inproc(
        f"{BIN}/bv synth --n 24 --out {tmp}/data && {BIN}/bv prompt {tmp}/data/meta_data.jsonl"
        f" | {BIN}/bv rollout --backend chance --repeats 2 --quiet | {BIN}/bv judge --mode rules --quiet",
        env={"XDG_CACHE_HOME": str(tmp / "cache")},
    )
    assert result.returncode == 0, result.stderr
    return tmp / "data", jsonl(result.stdout)


def test_one_card_per_item_with_summary_and_thumbnails(sample, tmp_path):
    _, rows = sample
    page = render(tmp_path, rows)
    tags = Tags(page)
    cards = tags.find("article", "card")
    assert len(cards) == 24 == len({r["id"] for r in rows})
    assert [c["id"] for c in cards] == [f"item-{i}" for i in range(1, 25)]  # natural order: 2 before 10
    images = tags.find("img")
    assert len(images) == 24 and all(img["data-h"] in thumbs(page) for img in images)
    assert all(
        uri.startswith(("data:image/webp;base64,", "data:image/jpeg;base64,"))
        for uri in thumbs(page).values()
    )
    # Nothing is fetched from outside: no links, no remote sources, a CSP that only allows data: images.
    assert not tags.find("link") and "http://" not in page and "https://" not in page and "url(" not in page
    assert "default-src 'none'; img-src data:" in page
    # Summary rows (overall, each type and subtype) and each run's verdict line, response folded.
    for label in ["Overall", *{r["type"] for r in rows}, *{r["subtype"] for r in rows}]:
        assert f"<td>{label}</td>" in page
    assert page.count('<details class="run"><summary><span class="v') == len(rows)
    assert len(tags.find("details", "run")) >= len(rows)
    wrong = {r["id"] for r in rows if r["hard"] != 1}
    assert {c["id"] for c in cards if c.get("data-wrong")} == {f"item-{i}" for i in wrong}


def test_untrusted_text_is_escaped(tmp_path):
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    hostile = row(
        '"><b>1',
        tmp_path / "none.png",
        question=evil,
        response=f"</pre>{evil}",
        extracted=evil,
        choices=[{"label": "A", "text": evil}, {"label": "B", "text": "</li></ol>"}],
        type='Type "quoted" <i>',
        subtype="</select><script>alert(3)</script>",
        judge_reason=evil,
        judge_reply=evil,
        cot=evil,
        endpoint=evil,
    )
    # two inputs named by hostile text: the summary at the top, the comparison and the provenance
    built, _ = build_report([(evil, [hostile]), ("b", [dict(hostile, hard=0)])])
    write_html(
        tmp_path / "out.html", built["inputs"], [[hostile], [dict(hostile, hard=0)]], built["comparison"]
    )
    page = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert 'id="overview"' in page and "<svg" in page
    tags = Tags(page)
    assert [t for t, _ in tags.tags].count("script") == 2  # the thumbnail data and the viewer's own script
    assert not tags.find("img")  # the image is missing: a placeholder; and no injected <img>
    assert not [a for _, attrs in tags.tags for a in attrs if a.startswith("on")]
    assert "alert(" not in re.sub(
        r"&lt;script&gt;alert\(\d\)&lt;/script&gt;|onerror=&quot;alert\(2\)&quot;", "", page
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    card = tags.find("article", "card")[0]
    assert (
        card["data-type"] == 'Type "quoted" <i>' and card["data-sub"] == "</select><script>alert(3)</script>"
    )
    assert "innerHTML" not in page and "outerHTML" not in page and "document.write" not in page


def test_missing_or_broken_image_gives_a_placeholder(sample, tmp_path):
    data, _ = sample
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    rows = [
        row("1", tmp_path / "gone.png"),
        row("2", tmp_path / "broken.png"),
        row("3", "images/3.png"),  # relative, no messages: cannot be found
        row("4", data / "images" / "1.png"),
    ]
    page = render(tmp_path, rows)
    tags = Tags(page)
    assert len(tags.find("article", "card")) == 4
    assert len(tags.find("div", "noimg")) == 3 and len(tags.find("img")) == 1
    assert str(tmp_path / "gone.png") in page and "images/3.png" in page
    # Results from another machine (paths gone) next to local ones: the card shows the local image.
    page = render(tmp_path, [row("1", tmp_path / "gone.png")], [row("1", data / "images" / "1.png")])
    assert len(Tags(page).find("img")) == 1 and not Tags(page).find("div", "noimg")


def test_each_image_is_embedded_once(sample, tmp_path):
    data, rows = sample
    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    moved = [json.loads(json.dumps(r).replace(f"file://{data}/", f"file://{copy}/")) for r in rows]
    page = render(tmp_path, rows, moved)
    assert len(thumbs(page)) == 24 == page.count("data:image/")  # two inputs × two runs, one copy each
    assert len(Tags(page).find("img")) == 24


def test_two_inputs_put_differing_items_first(sample, tmp_path):
    data, _ = sample
    image = data / "images" / "1.png"
    before = [row(str(i), image, run) for i in range(1, 7) for run in (0, 1)]
    after = [
        row(str(i), image, run, hard=0 if (i, run) in {(5, 0), (3, 1)} else 1)
        for i in range(1, 7)
        for run in (0, 1)
    ]
    after = [r for r in after if (r["id"], r["run"]) != ("6", 1)]  # a missing run: shown, not a difference
    after.append(row("7", image))  # only in the second input
    page = render(tmp_path, before, after)
    assert card_ids(page) == ["item-3", "item-5", "item-1", "item-2", "item-4", "item-6", "item-7"]
    cards = Tags(page).find("article", "card")
    assert [c["id"] for c in cards if c.get("data-diff")] == ["item-3", "item-5"]
    assert "differing only (2)" in page and page.count('class="v miss"') == 2  # 6 run 1 and 7 run 0
    assert "in0 2/2 right · in1 1/2 right" in page
    # Runs of the two inputs are paired: in0 run 0, in1 run 0, in0 run 1, in1 run 1.
    card3 = page[page.index('id="item-3"') : page.index('id="item-5"')]
    assert re.findall(r'class="who">(in\d · run \d)', card3) == [
        "in0 · run 0",
        "in1 · run 0",
        "in0 · run 1",
        "in1 · run 1",
    ]


def test_output_is_deterministic(sample, tmp_path):
    _, rows = sample
    shuffled = random.Random(1).sample(rows, len(rows))
    assert render(tmp_path, rows, name="a.html") == render(tmp_path, shuffled, name="b.html")


def test_verdicts_and_comparison(sample, tmp_path):
    data, _ = sample
    image = data / "images" / "1.png"
    rows = [
        row("1", image),
        row("2", image, hard=0),
        row("3", image, hard=None, judge_error="timeout"),
        row("4", image, hard=0, undecided=True, decided_by="rules"),
        row("5", image, hard=0, error="429 rate limited", response=None, extracted=None),
    ]
    page = render(tmp_path, rows)
    for label in (
        "✓ right",
        "✗ wrong",
        "judge error",
        "undecided",
        "rollout error",
        "timeout",
        "429 rate limited",
    ):
        assert label in page
    assert "in0: 5 items, 1 run, model fake-vl; 1 rollout error, 1 judge error, 1 undecided" in page


def test_size_of_400_items_3_runs_2_inputs(tmp_path):
    write_sample_set(tmp_path, 400)
    items = jsonl((tmp_path / "meta_data.jsonl").read_text())
    rng = random.Random(0)
    reasoning = "I compare each part of the picture in turn, counting and tracing carefully. " * 12
    inputs = []
    for name in ("a", "b"):
        rows = []
        for item in items:
            for run in range(3):
                r = row(str(item["taskId"]), tmp_path / item["image"], run, hard=int(rng.random() < 0.4))
                r.update(question=item["question"], type=item["type"], subtype=item["subtype"])
                r["response"] = f"{name}: {reasoning}\n\n{r['response']}"  # ~1 kB, a typical real reply
                rows.append(r)
        inputs.append(rows)
    page = render(tmp_path, *inputs)
    assert len(card_ids(page)) == 400 and len(thumbs(page)) == 400
    size = len(page.encode())
    responses = sum(len(r["response"].encode()) for rows in inputs for r in rows)  # 2.3 MB, unavoidable
    assert size - responses < 3_500_000, f"{size / 1e6:.1f} MB, {responses / 1e6:.1f} MB of it responses"
    assert size < 6_000_000, f"{size / 1e6:.1f} MB"


@pytest.mark.skipif(find_chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_renders_in_headless_chromium(sample):
    """One card per item, each image decoded, filters working, no console errors; saves a screenshot.

    The pages go to build/ (not /tmp, which a snap-packaged Chromium cannot read); they and
    build/report-html.png are left there to look at.
    """
    _, rows = sample
    build = ROOT / "build"
    build.mkdir(exist_ok=True)
    evil = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    render(build, rows, name="report-html.html", names=["results"])
    render(build, [row("evil", build / "none.png", question=evil)], name="report-html-escaping.html")
    items = {r["id"]: r for r in rows}
    with Browser() as browser:
        browser.open(build / "report-html.html", width=1280, height=1500)
        cards = browser.evaluate(
            "[...document.querySelectorAll('.card')].map(c => [...c.querySelectorAll('img')]"
            ".map(i => i.complete && i.naturalWidth > 0))"
        )
        assert len(cards) == len(items) == 24
        assert all(images == [True] for images in cards), cards  # one image per card, decoded

        def shown(js: str) -> int:
            """Cards left visible after running `js` against the filters."""
            return browser.evaluate(
                f"(() => {{ {js}; return document.querySelectorAll('.card:not([hidden])').length }})()"
            )

        set_filter = (
            "const e = document.getElementById('{}'); e.value = {}; e.dispatchEvent(new Event('input'))"
        )
        assert shown("document.getElementById('f-wrong').click()") == len(
            {r["id"] for r in rows if r["hard"] != 1}
        )
        assert shown("document.getElementById('f-wrong').click()") == 24
        kind = items["2"]["type"]
        n_kind = sum(r["type"] == kind for r in items.values())
        assert shown(set_filter.format("f-type", json.dumps(kind))) == n_kind
        assert (
            browser.evaluate("document.getElementById('count').textContent") == f"{n_kind} of 24 items shown"
        )
        assert shown(set_filter.format("f-type", "''")) == 24
        assert shown(set_filter.format("f-q", json.dumps(items["2"]["question"][:30].upper()))) >= 1
        assert shown(set_filter.format("f-q", "''")) == 24
        # Unfold one right run's response, so the screenshot shows a card's details too.
        browser.evaluate("document.querySelector('.card details.run:has(.ok)').open = true")
        browser.screenshot(build / "report-html.png")

        browser.open(build / "report-html-escaping.html")
        assert browser.evaluate("[typeof window.pwned, document.querySelectorAll('.noimg').length]") == [
            "undefined",
            1,
        ]
        assert not browser.errors, browser.errors
