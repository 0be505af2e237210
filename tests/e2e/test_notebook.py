"""bv.api in a Jupyter notebook, executed by nbclient on a real ipykernel (its cells run inside
the kernel's running event loop): two skills evaluated offline, their comparison shown as HTML,
a DataFrame of the rows, the folder of runs as a table; with no thread or loop workaround in the
notebook."""

from __future__ import annotations

import json

import pytest

nbformat = pytest.importorskip("nbformat", reason="the test extra's nbformat is not installed")
nbclient = pytest.importorskip("nbclient", reason="the test extra's nbclient is not installed")
pytest.importorskip("ipykernel", reason="the test extra's ipykernel is not installed")

CELLS = [
    "from pathlib import Path\nfrom bv import api",
    # a plain call, as in a script: the kernel's loop is running (it raised before, issue 44)
    """for name, text in (("v1", "Look twice."), ("v2", "Count carefully.")):
    Path(f"{name}.md").write_text(text)
    api.evaluate(ITEMS, f"runs/{name}", skill=f"{name}.md", backend="chance", seed=1,
                 mode="rules", cache=None, limit=6, repeats=2)""",
    'report = api.report({"v1": "runs/v1", "v2": "runs/v2"})\nreport',
    'frame = report.to_pandas()\nframe.groupby("name")["correct"].mean().to_dict()',
    'api.runs("runs")',  # the folder of runs, one row per run, as `bv report runs/` prints it
]


def _notebook(items: str):
    cells = [nbformat.v4.new_code_cell(source.replace("ITEMS", repr(items))) for source in CELLS]
    return nbformat.v4.new_notebook(cells=cells)


@pytest.mark.timeout(120)
def test_a_notebook_evaluates_two_skills_and_shows_their_comparison(sample_dir, tmp_path):
    notebook = _notebook(str(sample_dir / "meta_data.jsonl"))
    client = nbclient.NotebookClient(
        notebook, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"a cell failed in the kernel:\n{exc}")
    except (RuntimeError, OSError, TimeoutError) as exc:  # no kernel here: say so, do not fail
        pytest.skip(f"a Jupyter kernel cannot start here: {exc}")
    shown = notebook.cells[2].outputs[0]["data"]
    assert '<pre class="bv-report"' in shown["text/html"] and "v2 vs v1" in shown["text/html"]
    means = notebook.cells[3].outputs[0]["data"]["text/plain"]
    assert set(json.loads(means.replace("'", '"'))) == {"v1", "v2"}
    assert (tmp_path / "runs" / "v1" / "results.jsonl").is_file()
    runs = notebook.cells[4].outputs[0]["data"]["text/html"]
    assert '<pre class="bv-runs"' in runs and "v1" in runs and "v2" in runs and "finished" in runs
