"""Deterministic BabyVision-style sample set drawn with Pillow.

The real benchmark has 388 hand-made items; tests and benchmarks need any number of items offline,
in the same meta_data.jsonl layout, with answers that are certainly right. Every picture here is drawn
from a per-item random generator and its answer is computed from how it was drawn.

Item ``i`` depends only on ``(seed, i)``: a smaller ``n`` is a prefix of a larger one.
"""

from __future__ import annotations

import json
import os
import random
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from bv.data.synth_draw import (
    COLORS,
    CUBE_FACES,
    DISTRACTOR_COLORS,
    INK,
    LETTERS,
    VARIANTS,
    WHITE,
    all_distinct,
    draw_cell,
    draw_cube,
    draw_options,
    draw_shape,
    draw_text,
    glyph_tile,
    glyph_variant,
    random_glyph,
    smooth_path,
)

# (type, subtype, ansType) in the order items cycle through them. The first four cover all four
# categories and both answer types; six families (coprime with 5 and 7) make the JPEG and WebP
# items rotate through every family instead of always landing on the same one.
TASK_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("Fine-grained Discrimination", "Find the different", "blank"),
    ("Visual Tracking", "Connect the lines", "choice"),
    ("Spatial Perception", "Count 3D blocks", "blank"),
    ("Visual Pattern Recognition", "Logic Patterns", "choice"),
    ("Fine-grained Discrimination", "Find the same", "choice"),
    ("Visual Pattern Recognition", "Rotation Patterns", "choice"),
)


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


# --- Fine-grained Discrimination ---------------------------------------------------------------
def _find_different(rng: random.Random) -> tuple[dict[str, Any], Image.Image]:
    """Grid of identical glyphs with one subtly changed; answer (row,col), 1-based."""
    rows, cols, cell = rng.randint(3, 5), rng.randint(4, 7), rng.choice((56, 64, 72))
    base = random_glyph(rng)
    normal = glyph_tile(cell - 8, base)
    for kind in rng.sample(VARIANTS, len(VARIANTS)):
        odd = glyph_tile(cell - 8, glyph_variant(base, kind, rng))
        if all_distinct([normal, odd]):
            break
    r, c = rng.randrange(rows), rng.randrange(cols)
    width = max(360, cols * cell + 50)  # keep pictures at least ~360 px wide
    x0, y0 = max(34, (width - cols * cell) // 2), 34
    img = Image.new("RGB", (width, y0 + rows * cell + 16), WHITE)
    draw = ImageDraw.Draw(img)
    for i in range(rows):
        draw_text(draw, (x0 - 16, y0 + i * cell + cell / 2), str(i + 1))
        for j in range(cols):
            draw_text(draw, (x0 + j * cell + cell / 2, y0 - 16), str(j + 1))
            draw_cell(draw, x0 + j * cell, y0 + i * cell, cell)
            img.paste(odd if (i, j) == (r, c) else normal, (x0 + j * cell + 4, y0 + i * cell + 4))
    shape = f"{base['color_name']} {base['glyph']}"
    return {
        "question": f"This grid shows {rows * cols} copies of {_a(shape)} figure, but exactly one of them "
        "is different from the others. Which row and column is it in? Answer in the format (row,col).",
        "blankAns": f"({r + 1},{c + 1})",
        "coT": f"Every cell shows the same {shape} except row {r + 1}, column {c + 1}, "
        f"whose figure is {kind}.",
    }, img


def _find_same(rng: random.Random) -> tuple[dict[str, Any], Image.Image]:
    """A target glyph above four candidates; exactly one candidate is identical to it."""
    size, gap = 72, 24
    base = random_glyph(rng)
    while True:
        kinds = rng.sample(VARIANTS, 3)
        tiles = [glyph_tile(size, s) for s in [base, *(glyph_variant(base, k, rng) for k in kinds)]]
        if all_distinct(tiles):
            break
    width = 4 * size + 5 * gap
    img = Image.new("RGB", (width, 2 * size + 100), WHITE)
    draw = ImageDraw.Draw(img)
    tx = (width - size) // 2
    draw_text(draw, (width / 2, 16), "Target")
    draw_cell(draw, tx - 4, 28, size + 8)
    img.paste(tiles[0], (tx, 32))
    gold = draw_options(img, tiles, size + 60, gap, rng)
    return {
        "question": "Which of the figures A-D below is exactly the same as the target figure at the top?",
        "options": [f"Figure {LETTERS[i]}" for i in range(4)],
        "choiceAns": gold,
        "coT": f"Figure {LETTERS[gold]} matches the target exactly; the others are "
        f"{', '.join(kinds[:2])} or {kinds[2]}.",
    }, img


# --- Visual Tracking ---------------------------------------------------------------------------
def _connect_lines(rng: random.Random) -> tuple[dict[str, Any], Image.Image]:
    """Tangled coloured lines from numbered starts (left) to lettered ends (right)."""
    k = rng.randint(3, 5)
    width, height, left, right = 560, 400, 60, 500
    ys = [height * (i + 1) / (k + 1) for i in range(k)]
    ends = list(range(k))
    rng.shuffle(ends)
    colors = rng.sample(sorted(COLORS), k)
    img = Image.new("RGB", (width, height), WHITE)
    draw = ImageDraw.Draw(img)
    for i in range(k):
        mids = [(left + (right - left) * f, rng.uniform(30, height - 30)) for f in (0.25, 0.5, 0.75)]
        path = smooth_path([(left, ys[i]), *mids, (right, ys[ends[i]])])
        draw.line(path, fill=COLORS[colors[i]], width=5)
    for i, y in enumerate(ys):
        for x, label, dx in ((left, str(i + 1), -24), (right, LETTERS[i], 24)):
            draw.ellipse((x - 7, y - 7, x + 7, y + 7), fill=INK)
            draw_text(draw, (x + dx, y), label, 22)
    q = rng.randrange(k)
    return {
        "question": f"Each line joins a numbered point on the left to a lettered point on the right. "
        f"Where does the line that starts at point {q + 1} end?",
        "options": [f"End {LETTERS[i]}" for i in range(k)],
        "choiceAns": ends[q],
        "coT": f"Following the {colors[q]} line from point {q + 1} leads to end {LETTERS[ends[q]]}.",
    }, img


# --- Spatial Perception ------------------------------------------------------------------------
def _count_blocks(rng: random.Random) -> tuple[dict[str, Any], Image.Image]:
    """Separate isometric cubes among flat distractor shapes; answer the number of cubes."""
    k, extra = rng.randint(2, 9), rng.randint(2, 5)
    cols, rows, sw, sh = 6, 4, 90, 95
    slots = rng.sample([(c, r) for c in range(cols) for r in range(rows)], k + extra)
    img = Image.new("RGB", (cols * sw + 20, rows * sh + 20), WHITE)
    draw = ImageDraw.Draw(img)
    kinds = set()
    for n, (c, r) in enumerate(slots):
        cx = 10 + c * sw + sw / 2 + rng.uniform(-10, 10)
        cy = 10 + r * sh + sh / 2 + rng.uniform(-8, 8)
        if n < k:
            draw_cube(draw, cx, cy, rng.choice((24, 28, 32)), rng.choice(CUBE_FACES))
            continue
        kind = rng.choice(("circle", "square", "triangle"))
        kinds.add(kind + "s")
        draw_shape(draw, kind, cx, cy, rng.choice((20, 24)), rng.choice(DISTRACTOR_COLORS))
    return {
        "question": "How many cubes (3D blocks) are in the picture? Flat shapes do not count. "
        "Answer with a number.",
        "blankAns": str(k),
        "coT": f"There are {k} cubes; the flat {' and '.join(sorted(kinds))} are not blocks.",
    }, img


# --- Visual Pattern Recognition ----------------------------------------------------------------
def _logic_patterns(rng: random.Random) -> tuple[dict[str, Any], Image.Image]:
    """A row of shapes cycling in shape and/or colour; which description fills the '?' cell."""
    p_shape, p_color = rng.choice(((1, 2), (2, 1), (2, 2), (3, 1), (1, 3), (2, 3), (3, 2), (3, 3)))
    shape_pool = rng.sample(("circle", "square", "triangle", "diamond", "star"), p_shape + 1)
    color_pool = rng.sample(sorted(COLORS), p_color + 1)
    shown = max(4, 2 * max(p_shape, p_color))
    seq = [(shape_pool[i % p_shape], color_pool[i % p_color]) for i in range(shown + 1)]
    answer = seq[-1]
    cell = 72
    img = Image.new("RGB", ((shown + 1) * cell + 40, cell + 40), WHITE)
    draw = ImageDraw.Draw(img)
    for i, (shape, color) in enumerate(seq):
        x = 20 + i * cell
        draw_cell(draw, x, 20, cell)
        if i < shown:
            draw_shape(draw, shape, x + cell / 2, 20 + cell / 2, cell * 0.32, COLORS[color])
        else:
            draw_text(draw, (x + cell / 2, 20 + cell / 2), "?", 40)
    pool = [(s, c) for s in shape_pool for c in color_pool if (s, c) != answer]
    options = [answer, *rng.sample(pool, 3)]
    rng.shuffle(options)
    shape_rule = f"shapes repeat every {p_shape} boxes" if p_shape > 1 else f"shape is always {_a(answer[0])}"
    color_rule = f"colours repeat every {p_color} boxes" if p_color > 1 else f"colour is always {answer[1]}"
    gold = f"{answer[1]} {answer[0]}"
    return {
        "question": "The boxes follow a repeating pattern from left to right. "
        "What belongs in the box with the question mark?",
        "options": [f"{c} {s}" for s, c in options],
        "choiceAns": options.index(answer),
        "coT": f"The {shape_rule} and the {color_rule}, so box {shown + 1} is {_a(gold)}.",
    }, img


def _rotation_patterns(rng: random.Random) -> tuple[dict[str, Any], Image.Image]:
    """A glyph turning by a fixed step per box; pick the figure that comes next."""
    size, gap = 64, 16
    base = random_glyph(rng)
    step = rng.choice((45, 90, -45, -90))
    seq = [dict(base, angle=base["angle"] + step * i) for i in range(5)]
    answer = seq[4]
    tiles = [glyph_tile(size, answer)]
    # Wrong options as (extra turn, flip the mirror): a step short, half a turn off, mirrored, a step too far.
    for turn, flip in ((-step, False), (180, False), (0, True), (step, False)):
        tile = glyph_tile(size, dict(answer, angle=answer["angle"] + turn, mirror=answer["mirror"] != flip))
        if len(tiles) < 4 and all_distinct([*tiles, tile]):
            tiles.append(tile)
    assert len(tiles) == 4, "glyphs are asymmetric, so at least three wrong turns differ"
    width = 5 * size + 6 * gap
    img = Image.new("RGB", (width, 2 * size + 110), WHITE)
    draw = ImageDraw.Draw(img)
    for i in range(5):
        x = gap + i * (size + gap)
        draw_cell(draw, x - 4, 16, size + 8)
        if i < 4:
            img.paste(glyph_tile(size, seq[i]), (x, 20))
        else:
            draw_text(draw, (x + size / 2, 20 + size / 2), "?", 36)
    gold = draw_options(img, tiles, size + 56, gap, rng)
    turning = f"{abs(step)} degrees {'clockwise' if step > 0 else 'counterclockwise'}"
    return {
        "question": "The figure turns by the same amount from each box to the next. "
        "Which option (A-D) belongs in the box with the question mark?",
        "options": [f"Figure {LETTERS[i]}" for i in range(4)],
        "choiceAns": gold,
        "coT": f"The figure turns {turning} each step, so the next box shows figure {LETTERS[gold]}.",
    }, img


_BUILDERS = (_find_different, _connect_lines, _count_blocks, _logic_patterns, _find_same, _rotation_patterns)


def image_format(task_id: int) -> str:
    """File extension of an item: multiples of 7 are WebP, other multiples of 5 JPEG, the rest PNG."""
    return "webp" if task_id % 7 == 0 else "jpg" if task_id % 5 == 0 else "png"


def make_item(task_id: int, seed: int = 0) -> tuple[dict[str, Any], Image.Image]:
    """Build item ``task_id`` (1-based): its meta_data record and its picture, from (seed, task_id) only."""
    family = (task_id - 1) % len(TASK_FAMILIES)
    kind, subtype, ans_type = TASK_FAMILIES[family]
    fields, img = _BUILDERS[family](random.Random(f"{seed}:{task_id}"))
    return {
        "taskId": task_id,
        "question": fields["question"],
        "image": f"images/{task_id}.{image_format(task_id)}",
        "ansType": ans_type,
        "options": fields.get("options", []),
        "choiceAns": fields.get("choiceAns"),
        "blankAns": fields.get("blankAns"),
        "type": kind,
        "subtype": subtype,
        "coT": fields["coT"],
    }, img


# Pillow format and options per extension: fast settings, since flat drawings compress well anyway.
_SAVE_AS: dict[str, tuple[str, dict[str, int]]] = {
    "png": ("PNG", {"compress_level": 1}),
    "jpg": ("JPEG", {"quality": 90}),
    "webp": ("WEBP", {"quality": 90, "method": 0}),
}


def write_sample_set(out_dir: Path, n: int, seed: int = 0) -> int:
    """Write out_dir/meta_data.jsonl and out_dir/images/; return the number of items written.

    Drawing stays on this thread, so the cached fonts are never used by two threads at once; encoding,
    which is most of the time and releases the GIL, runs on worker threads with a bounded backlog.
    Files from an earlier, larger run are left in place; meta_data.jsonl lists only these n items.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    pending: deque[Any] = deque()
    workers = min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for task_id in range(1, n + 1):
            record, img = make_item(task_id, seed)
            fmt, options = _SAVE_AS[image_format(task_id)]
            pending.append(pool.submit(img.save, out_dir / record["image"], fmt, **options))
            if len(pending) > 2 * workers:
                pending.popleft().result()
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        for future in pending:
            future.result()
    (out_dir / "meta_data.jsonl").write_text("".join(lines), encoding="utf-8")
    return n
