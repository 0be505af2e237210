"""bv data: a parquet file in the Hub dataset's schema and a zip in the official layout become
meta_data.jsonl + images/, checked, atomically; the Hub fetch runs offline over a prepared cache."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from PIL import Image
from support.commands import bv_inproc, jsonl, read_items, sh
from support.sources import sample_parquet, write_parquet, zip_of

from bv.data.writer import PUBLISHED


def same_items(out: Path, sample_dir: Path, cot: bool) -> None:
    """`out` holds the sample's items, field for field (the coT too when the source had it),
    and its images, byte for byte."""
    written, original = read_items(out), read_items(sample_dir)
    drop = ("image",) if cot else ("image", "coT")
    assert [{k: v for k, v in r.items() if k not in drop} for r in written] == [
        {k: v for k, v in r.items() if k not in drop} for r in original
    ]
    for new, old in zip(written, original, strict=True):
        assert new["image"] == old["image"]  # plain names are kept
        assert (out / new["image"]).read_bytes() == (sample_dir / old["image"]).read_bytes()


def test_parquet_becomes_the_official_layout(sample_dir, tmp_path):
    source = sample_parquet(sample_dir, tmp_path / "train-00000-of-00001.parquet")
    out = tmp_path / "set"
    result = bv_inproc(f"bv data --from {source} --out {out}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out)
    same_items(out, sample_dir, cot=False)
    marker = json.loads((out / ".bv-data.json").read_text())
    assert marker["source"] == f"file:{source.name}"
    assert marker["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert "12 items (8 choice, 4 blank), 6 subtypes; images from" in result.stderr
    assert "published" not in result.stderr  # a file of another name does not claim to be the official set
    prompts = bv_inproc(f"bv prompt {out / 'meta_data.jsonl'}")
    assert prompts.returncode == 0 and len(jsonl(prompts.stdout)) == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set", source.name]  # nothing left beside it


def test_zip_with_a_top_folder_and_idempotence(sample_dir, tmp_path):
    source = zip_of(sample_dir, tmp_path / "data.zip")
    out = tmp_path / "set"
    assert bv_inproc(f"bv data --from {source} --out {out}").returncode == 0
    same_items(out, sample_dir, cot=True)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    again = bv_inproc(f"bv data --from {source} --out {out}")
    assert again.returncode == 0 and f"already up to date: {out}" in again.stderr
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    # The same items from the parquet file, which has no coT: a different set, so it is replaced.
    parquet = sample_parquet(sample_dir, tmp_path / "x.parquet")
    assert f"wrote {out}" in bv_inproc(f"bv data --from {parquet} --out {out}").stderr


def test_changed_source_replaces_the_set_and_foreign_folders_are_kept(sample_dir, tmp_path):
    records = read_items(sample_dir)
    images = [(sample_dir / r["image"]).read_bytes() for r in records]
    out = tmp_path / "set"
    assert (
        bv_inproc(
            f"bv data --from {write_parquet(tmp_path / 'a.parquet', records, images)} --out {out}"
        ).returncode
        == 0
    )
    fewer = write_parquet(tmp_path / "b.parquet", records[:5], images[:5])
    result = bv_inproc(f"bv data --from {fewer} --out {out}")
    assert result.returncode == 0 and f"wrote {out}" in result.stderr
    assert len(read_items(out)) == 5 and len(list((out / "images").iterdir())) == 5
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    refused = bv_inproc(f"bv data --from {fewer} --out {foreign}")
    assert refused.returncode == 1 and "not written by bv data" in refused.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["thesis.tex"]


def test_columns_that_do_not_fit_are_refused(sample_dir, tmp_path):
    records = read_items(sample_dir)
    images = [(sample_dir / r["image"]).read_bytes() for r in records]
    source = write_parquet(tmp_path / "odd.parquet", records, images, drop=("blankAns", "choices"))
    result = bv_inproc(f"bv data --from {source} --out {tmp_path / 'set'}")
    assert result.returncode == 1
    assert "do not fit the BabyVision layout: missing options or choices, blankAns" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "set").exists()


def test_bad_rows_cost_the_set_unless_skipped(sample_dir, tmp_path):
    records = read_items(sample_dir)
    images = [(sample_dir / r["image"]).read_bytes() for r in records]
    images[3] = images[3][:40]  # a truncated PNG: sniffs as one, does not decode
    escape = {"babyvision_data/meta_data.jsonl": b""}  # replaced below
    lines = [json.dumps(r) for r in records]
    lines[5] = json.dumps({**records[5], "image": "../../etc/passwd"})
    escape["babyvision_data/meta_data.jsonl"] = ("\n".join(lines) + "\n").encode()
    tree = tmp_path / "tree"
    shutil.copytree(sample_dir / "images", tree / "images")
    zipped = zip_of(tree, tmp_path / "evil.zip", extra=escape)
    parquet = write_parquet(tmp_path / "bad.parquet", records, images)
    out = tmp_path / "set"
    for source, why in (
        (parquet, "bad.parquet: row 4: the image cannot be decoded"),
        (zipped, "is not in the zip"),
    ):
        refused = bv_inproc(f"bv data --from {source} --out {out}")
        assert refused.returncode == 1 and why in refused.stderr, refused.stderr
        assert "nothing written (--skip-bad writes the rest)" in refused.stderr
        assert not out.exists() and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    kept = bv_inproc(f"bv data --from {parquet} --out {out} --skip-bad")
    assert kept.returncode == 0, kept.stderr
    assert [r["taskId"] for r in read_items(out)] == [r["taskId"] for r in records if r["taskId"] != 4]


def test_stale_partial_folders_of_dead_runs_are_cleaned(sample_dir, tmp_path):
    stale = tmp_path / ".set.partial-999999999-abc"
    (stale / "images").mkdir(parents=True)
    result = bv_inproc(
        f"bv data --from {sample_parquet(sample_dir, tmp_path / 'a.parquet')} --out {tmp_path / 'set'}"
    )
    assert result.returncode == 0 and not stale.exists()


def test_without_the_extra_bv_data_says_what_to_install(sample_dir, tmp_path):
    fake = tmp_path / "shadow" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('not installed')\n")
    source = sample_parquet(sample_dir, tmp_path / "a.parquet")
    result = sh(
        f"bv data --from {source} --out {tmp_path / 'set'}", env={"PYTHONPATH": str(tmp_path / "shadow")}
    )
    assert result.returncode == 1
    assert "bv data needs pyarrow, which is not installed: pip install 'babyvision-bv[data]'" in result.stderr
    # The official zip needs no extra at all.
    zipped = zip_of(sample_dir, tmp_path / "d.zip")
    ok = sh(f"bv data --from {zipped} --out {tmp_path / 'set'}", env={"PYTHONPATH": str(tmp_path / "shadow")})
    assert ok.returncode == 0, ok.stderr


# --- the Hub fetch, offline over a prepared huggingface_hub cache -------------------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def png(shade: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (6, 4), (shade, 0, 0)).save(buffer, "PNG")
    return buffer.getvalue()


def official_like(counts: dict[str, int] = PUBLISHED["type"]) -> tuple[list[dict], list[bytes]]:
    """388 tiny items with the published counts: 135 choice, 253 blank, four types, 22 subtypes."""
    subtypes_per_type = dict(zip(sorted(counts), (6, 5, 5, 6), strict=True))
    records, images = [], []
    for kind in sorted(counts):
        for i in range(counts[kind]):
            n = len(records) + 1
            choice = n <= 135
            records.append(
                {
                    "taskId": n,
                    "question": f"question {n}",
                    "image": f"images/{n}.png",
                    "ansType": "choice" if choice else "blank",
                    "options": ["x", "y", "z"] if choice else [],
                    "choiceAns": n % 3 if choice else None,
                    "blankAns": None if choice else f"({n},1)",
                    "type": kind,
                    "subtype": f"{kind} {i % subtypes_per_type[kind]}",
                }
            )
            images.append(png(n % 250))
    return records, images


def hub_cache(root: Path, records: list[dict], images: list[bytes]) -> dict[str, str]:
    """A huggingface_hub cache holding the dataset at COMMIT (refs/main points there); the env
    that makes bv data use it, offline, with any network use failing at once."""
    repo = root / "hub" / "datasets--UnipatAI--BabyVision"
    write_parquet(repo / "snapshots" / COMMIT / "data" / "train-00000-of-00001.parquet", records, images)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return {"HF_HOME": str(root), "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}


def test_fetch_from_the_hub_cache_offline_matches_the_published_figures(tmp_path):
    env = hub_cache(tmp_path / "hf", *official_like())
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    result = sh("bv data", env=env)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "xdg" / "bv" / "babyvision"
    assert result.stdout.strip() == str(out) == sh("bv data --where", env=env).stdout.strip()
    assert "388 items (135 choice, 253 blank), 22 subtypes" in result.stderr
    assert "matches the published figures of the official set" in result.stderr
    assert len(read_items(out)) == 388 and len(list((out / "images").iterdir())) == 388
    marker = json.loads((out / ".bv-data.json").read_text())
    assert marker["source"] == f"hf://datasets/UnipatAI/BabyVision@{COMMIT}"
    pinned = sh(f"bv data --revision {COMMIT} --out {tmp_path / 'pinned'}", env=env)
    assert pinned.returncode == 0, pinned.stderr


def test_fetch_says_when_the_set_differs_from_the_published_one(tmp_path):
    records, images = official_like()
    env = hub_cache(tmp_path / "hf", records[:-1], images[:-1])
    result = sh(f"bv data --out {tmp_path / 'set'}", env=env)
    assert result.returncode == 1
    assert "not the published official set" in result.stderr
    assert (
        "items: 387 (published: 388)" in result.stderr
        and "Visual Tracking: 82 (published: 83)" in result.stderr
    )


def test_fetch_offline_without_a_cache_fails_clearly(tmp_path):
    env = {"HF_HOME": str(tmp_path / "empty"), "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    result = sh(f"bv data --out {tmp_path / 'set'}", env=env)
    assert result.returncode == 1
    assert "cannot fetch UnipatAI/BabyVision from the Hugging Face Hub" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "set").exists()


def test_fetch_without_network_fails_clearly(tmp_path):
    """Online mode, but the Hub endpoint is a closed loopback port: no network is ever used."""
    env = {"HF_HOME": str(tmp_path / "empty"), "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}
    result = sh(f"bv data --out {tmp_path / 'set'}", env=env)
    assert result.returncode == 1
    assert "cannot fetch UnipatAI/BabyVision" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "set").exists()


def _rows_then(sample_dir: Path, stop) -> object:
    """The sample's rows as bv.data.sources reads them, with `stop()` called halfway through."""
    from bv.data.sources import read_source

    rows = list(read_source(zip_of(sample_dir, sample_dir.parent / f"{sample_dir.name}-stop.zip")))
    for number, row in enumerate(rows):
        if number == len(rows) // 2:
            stop()
        yield row


def test_an_interrupted_write_leaves_the_old_set_whole(sample_dir, tmp_path):
    """Ctrl-C and SIGTERM halfway: the previous set is untouched and no half set is left."""
    import signal

    from bv.data.writer import write_set

    out = tmp_path / "set"
    assert bv_inproc(f"bv data --from {zip_of(sample_dir, tmp_path / 'a.zip')} --out {out}").returncode == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def interrupt() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_set(_rows_then(sample_dir, interrupt), out, {"source": "test"}, skip_bad=False)
    from bv.cli import ending

    ending.install_sigterm()  # as bv's main() does
    try:
        with pytest.raises(ending.Terminated):
            stop = lambda: os.kill(os.getpid(), signal.SIGTERM)  # noqa: E731
            write_set(_rows_then(sample_dir, stop), out, {"source": "t"}, skip_bad=False)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip", "set"]
