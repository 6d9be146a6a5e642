"""The fingerprinter: the CLI's fingerprints, many at once, weights."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import simstore

DOCS = [
    "The quick brown fox jumps over the lazy dog near the river bank",
    "The quick brown fox jumps over the lazy dog near the river bend",
    "An entirely different document about databases and storage engines",
    "",
    "<p>not html here</p>",
]


def test_many_is_one_by_one():
    f = simstore.Fingerprinter()
    many = f.fingerprint_many(DOCS * 40)
    assert many.dtype == np.uint64 and len(many) == len(DOCS) * 40
    one = [f.fingerprint(d) or 0 for d in DOCS] * 40
    assert many.tolist() == one
    assert f.fingerprint("") is None
    html = ["<html><body><p>Hello there</p><script>x()</script></body></html>"] * 100
    assert f.fingerprint_many(html, html=True).tolist() == [f.fingerprint_html(html[0])] * 100


def test_near_duplicates_are_near():
    f = simstore.Fingerprinter()
    a, b, c = (f.fingerprint(d) for d in DOCS[:3])
    assert bin(a ^ b).count("1") < bin(a ^ c).count("1")


def test_weights_give_the_bits():
    f = simstore.Fingerprinter(shingle=2)
    w = f.weights(DOCS[0])
    assert w.dtype == np.float64 and w.shape == (64,)
    bits = sum(1 << j for j in range(64) if w[j] > 0)
    assert bits == f.fingerprint(DOCS[0])
    assert f.weights("") is None


def test_options_change_the_fingerprint():
    text = DOCS[0]
    base = simstore.Fingerprinter().fingerprint(text)
    assert simstore.Fingerprinter(shingle=1).fingerprint(text) != base
    assert simstore.Fingerprinter(char_shingle=4).fingerprint(text) != base
    assert simstore.Fingerprinter(stop_words=True).fingerprint(text) != base
    assert repr(simstore.Fingerprinter(shingle=2)) == "Fingerprinter(shingle=2, char_shingle=None, stop_words=False)"


def cli() -> str | None:
    """The `simstore` command: $SIMSTORE_CLI (set by .ci/test, which builds
    it), else one on the PATH."""
    return os.environ.get("SIMSTORE_CLI") or shutil.which("simstore")


@pytest.mark.skipif(cli() is None, reason="no simstore command (set SIMSTORE_CLI)")
@pytest.mark.parametrize("args,kw", [([], {}), (["--shingle", "2"], {"shingle": 2}), (["--stop-words"], {"stop_words": True})])
def test_same_fingerprints_as_the_cli(tmp_path, args, kw):
    files = []
    for i, d in enumerate(DOCS):
        p = tmp_path / f"doc{i}.txt"
        p.write_text(d)
        files.append(str(p))
    run = subprocess.run([cli(), "hash", *args, *files], capture_output=True, text=True)
    # Exit code 3: some input skipped (the empty document), with a warning.
    assert run.returncode == 3 and "empty document" in run.stderr
    out = run.stdout
    printed = {line.split("\t")[1]: int(line.split("\t")[0], 16) for line in out.splitlines()}
    f = simstore.Fingerprinter(**kw)
    for p, d in zip(files, DOCS):
        want = f.fingerprint(d)
        assert printed.get(p) == want
