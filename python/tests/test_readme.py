"""The README's Python snippets run as written."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_there_are_snippets():
    assert len(SNIPPETS) >= 4


@pytest.mark.parametrize("i", range(len(SNIPPETS)))
def test_snippet_runs(tmp_path, i):
    if "pyspark" in SNIPPETS[i] and not os.environ.get("SIMSTORE_REQUIRE_SPARK"):
        pytest.importorskip("pyspark")
    old = os.getcwd()
    os.chdir(tmp_path)
    out = io.StringIO()
    names: dict = {"__name__": "__readme__"}
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(SNIPPETS[i], f"README.md python snippet {i}", "exec"), names)
    finally:
        os.chdir(old)
    printed = out.getvalue()
    if "crawl-state" in SNIPPETS[i]:
        assert "https://b.example/2 is a near-duplicate of ['https://a.example/1']" in printed
    if "dedup-state" in SNIPPETS[i]:
        assert printed.splitlines() == ["a new", "b near-duplicate of a", "c new"]
    if "arrow-store" in SNIPPETS[i]:
        pairs = names["pairs"]
        ids = names["table"].column("id").to_numpy()
        found = sorted((int(ids[q]), int(i)) for q, i in zip(pairs["query"], pairs["id"]))
        assert found == [(1, 2), (2, 1)]
    if "from simstore import spark" in SNIPPETS[i]:
        assert printed.splitlines() == [
            "[Row(id_a=1, id_b=2, distance=0)] "
            "[Row(id=1, duplicate_of=None), Row(id=2, duplicate_of=1), Row(id=3, duplicate_of=None)]",
            "[Row(batch_id=2, collection_id=1, distance=0), Row(batch_id=2, collection_id=2, distance=0)]",
        ]
