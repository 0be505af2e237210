"""The drawing primitives of bv's sample set (bv.data.synth): palette, glyphs, grid cells, option
rows, isometric cubes and flat shapes, all drawn with Pillow without anti-aliasing, so that equal
inputs give equal pixels and a test can read an answer back from the picture."""

from __future__ import annotations

import math
import random
from functools import cache
from typing import Any

from PIL import Image, ImageDraw, ImageFont

WHITE = (255, 255, 255)
INK = (0, 0, 0)  # grid lines, markers and labels; no shape is ever this dark
COLORS = {
    "red": (220, 50, 50),
    "blue": (50, 100, 220),
    "green": (40, 160, 70),
    "yellow": (240, 200, 40),
    "purple": (150, 70, 200),
    "orange": (240, 130, 30),
}
# Cube face shades (top, left, right). Distractors never use these, so counting cube tops in the
# picture gives the answer; tests rely on that.
CUBE_FACES = (
    ((250, 120, 120), (200, 40, 40), (130, 20, 20)),
    ((130, 170, 250), (40, 80, 200), (20, 40, 120)),
    ((140, 230, 140), (40, 160, 60), (20, 90, 30)),
)
DISTRACTOR_COLORS = ((160, 160, 160), (190, 120, 230), (150, 110, 60))
LETTERS = "ABCDEFGH"

# Asymmetric glyphs in tenths of a unit (y down): outline polygon and "detail" dots inside it.
# None of them looks the same after a quarter turn or a mirror, so variants are really different.
GLYPHS: dict[str, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {
    "flag": ([(-5.5, 9), (-5.5, -9), (8, -4.5), (-2.5, 0), (-2.5, 9)], [(-4, 5.5), (-0.5, -4.5), (3, -4.5)]),
    "boot": ([(-7, -9), (-1, -9), (-1, 3), (8, 3), (8, 9), (-7, 9)], [(-4, -5), (-4, 6), (4.5, 6)]),
    "arrow": (
        [(-9, -2.5), (1.5, -2.5), (1.5, -7), (9, 0), (1.5, 7), (1.5, 2.5), (-9, 2.5)],
        [(-6, 0), (-2, 0), (4, -2)],
    ),
    "house": (
        [(-8, 9), (-8, -1), (0, -9), (3.5, -5.5), (3.5, -8.5), (6, -8.5), (6, -3), (8, -1), (8, 9)],
        [(-4.5, 3), (4.5, 3), (0, -3)],
    ),
}
VARIANTS = ("rotated", "mirrored", "missing a dot", "smaller")
# Pillow's bundled font, so output never depends on system fonts; one cached instance per size.
_font = cache(ImageFont.load_default)


def draw_text(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int = 16) -> None:
    draw.text(xy, text, fill=INK, font=_font(size=size), anchor="mm")


def glyph_tile(size: int, spec: dict[str, Any]) -> Image.Image:
    """Draw one glyph tile; identical specs give identical pixels (no anti-aliasing)."""
    tile = Image.new("RGB", (size, size), WHITE)
    draw = ImageDraw.Draw(tile)
    outline, dots = GLYPHS[spec["glyph"]]
    unit = size * 0.038 * spec.get("scale", 1.0)  # a tenth; leaves room for a 45-degree turn
    ang = math.radians(spec["angle"])
    cos, sin = math.cos(ang), math.sin(ang)

    def place(x: float, y: float) -> tuple[float, float]:
        x = -x if spec["mirror"] else x
        return size / 2 + unit * (x * cos - y * sin), size / 2 + unit * (x * sin + y * cos)

    draw.polygon([place(x, y) for x, y in outline], fill=spec["color"])
    r = unit * 1.3
    for i, (x, y) in enumerate(dots):
        if i != spec.get("drop"):
            cx, cy = place(x, y)
            draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=WHITE)
    return tile


def glyph_variant(spec: dict[str, Any], kind: str, rng: random.Random) -> dict[str, Any]:
    """A subtly changed copy of a glyph spec."""
    if kind == "rotated":
        return dict(spec, angle=spec["angle"] + rng.choice((90, 180, 270)))
    if kind == "mirrored":
        return dict(spec, mirror=not spec["mirror"])
    if kind == "missing a dot":
        return dict(spec, drop=rng.randrange(len(GLYPHS[spec["glyph"]][1])))
    return dict(spec, scale=0.78)


def random_glyph(rng: random.Random) -> dict[str, Any]:
    name = rng.choice(sorted(COLORS))
    return {
        "glyph": rng.choice(sorted(GLYPHS)),
        "color": COLORS[name],
        "color_name": name,
        "angle": rng.choice((0, 90, 180, 270)),
        "mirror": rng.random() < 0.5,
    }


def all_distinct(tiles: list[Image.Image]) -> bool:
    return len({t.tobytes() for t in tiles}) == len(tiles)


def draw_cell(draw: ImageDraw.ImageDraw, x: int, y: int, size: int) -> None:
    draw.rectangle((x, y, x + size, y + size), outline=INK, width=2)


def draw_options(img: Image.Image, tiles: list[Image.Image], y: int, gap: int, rng: random.Random) -> int:
    """Draw tiles[0] (the right answer) and its distractors in shuffled, lettered boxes; return gold."""
    order = list(range(len(tiles)))
    rng.shuffle(order)
    draw = ImageDraw.Draw(img)
    size = tiles[0].width
    x0 = (img.width - len(tiles) * (size + gap) + gap) // 2  # centred under the picture
    for slot, k in enumerate(order):
        x = x0 + slot * (size + gap)
        draw_cell(draw, x - 4, y - 4, size + 8)
        img.paste(tiles[k], (x, y))
        draw_text(draw, (x + size / 2, y + size + 18), LETTERS[slot])
    return order.index(0)


def smooth_path(points: list[tuple[float, float]], steps: int = 14) -> list[tuple[float, float]]:
    """Catmull-Rom spline through the points, so lines look hand-drawn rather than jagged."""
    pts = [points[0], *points, points[-1]]
    out: list[tuple[float, float]] = []
    for seg in zip(pts, pts[1:], pts[2:], pts[3:], strict=False):
        for t in (s / steps for s in range(steps)):
            w = (t * ((2 - t) * t - 1), t * t * (3 * t - 5) + 2, t * ((4 - 3 * t) * t + 1), t * t * (t - 1))
            x, y = (sum(k * p[d] for k, p in zip(w, seg, strict=True)) / 2 for d in (0, 1))
            out.append((x, y))
    return [*out, points[-1]]


def draw_cube(draw: ImageDraw.ImageDraw, cx: float, cy: float, a: float, faces: tuple) -> None:
    """Isometric cube whose top-face centre-bottom vertex is (cx, cy)."""
    h = a * math.sqrt(3) / 2
    top = [(cx, cy - a), (cx + h, cy - a / 2), (cx, cy), (cx - h, cy - a / 2)]
    lft = [(cx - h, cy - a / 2), (cx, cy), (cx, cy + a), (cx - h, cy + a / 2)]
    rgt = [(cx, cy), (cx + h, cy - a / 2), (cx + h, cy + a / 2), (cx, cy + a)]
    for poly, color in zip((top, lft, rgt), faces, strict=True):
        draw.polygon(poly, fill=color, outline=INK)


def draw_shape(draw: ImageDraw.ImageDraw, kind: str, cx: float, cy: float, s: float, fill: tuple) -> None:
    """A flat outlined shape of half-size s centred on (cx, cy)."""
    box = (cx - s, cy - s, cx + s, cy + s)
    if kind == "circle":
        draw.ellipse(box, fill=fill, outline=INK)
    elif kind == "square":
        draw.rectangle(box, fill=fill, outline=INK)
    elif kind == "triangle":
        draw.polygon([(cx, cy - s), (cx + s, cy + s), (cx - s, cy + s)], fill=fill, outline=INK)
    elif kind == "diamond":
        draw.polygon([(cx, cy - s), (cx + s, cy), (cx, cy + s), (cx - s, cy)], fill=fill, outline=INK)
    else:  # star
        rays = enumerate([s, s * 0.45] * 5)
        pts = [(cx + r * math.sin(i * math.pi / 5), cy - r * math.cos(i * math.pi / 5)) for i, r in rays]
        draw.polygon(pts, fill=fill, outline=INK)
