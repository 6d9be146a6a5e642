"""simstore.dedup makes the command line's decisions on the same
documents, and shares its store and log."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import simstore
from test_fingerprint import cli

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()
TEMPLATE = "Home | About | Contact | Login | Privacy policy | Terms of use | Copyright 2026 Example Corp"


def corpus(seed: int, n: int = 400) -> list:
    """Documents with near-duplicates (a few words changed), exact
    duplicates, pages that share only a template, and empty ones."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        r = rng.random()
        if docs and r < 0.3:
            base = docs[int(rng.integers(0, len(docs)))][1].split() or ["empty"]
            for _ in range(int(rng.integers(0, 3))):
                base[int(rng.integers(0, len(base)))] = WORDS[int(rng.integers(0, len(WORDS)))]
            text = " ".join(base)
        elif docs and r < 0.35:
            text = docs[int(rng.integers(0, len(docs)))][1]
        elif r < 0.37:
            text = ""
        else:
            body = " ".join(WORDS[int(j)] + str(int(j) % 7) for j in rng.integers(0, len(WORDS), size=int(rng.integers(5, 60))))
            text = TEMPLATE + " " + body if r < 0.6 else body
        docs.append((f"doc-{i}", text))
    return docs


def cli_decisions(tmp_path, docs, *args) -> dict:
    src = tmp_path / "docs.jsonl"
    with open(src, "w") as f:
        for name, text in docs:
            f.write(json.dumps({"id": name, "text": text}) + "\n")
    out = subprocess.run(
        [cli(), "dedup", str(tmp_path / "cli-store"), "--jsonl", *args, str(src)], capture_output=True, text=True
    )
    assert out.returncode in (0, 3), out.stderr
    found = {}
    for line in out.stdout.splitlines():
        d = json.loads(line)
        of = d["duplicate_of"]
        found[d["id"]] = (int(d["fingerprint"], 16), of and of["id"], of and of["distance"], of and of.get("similarity"))
    return found


@pytest.mark.skipif(cli() is None, reason="no simstore command (set SIMSTORE_CLI)")
@pytest.mark.parametrize("kwargs,args", [({}, []), ({"k": 2}, ["--max-distance", "2"]), ({"similarity": 0.8}, ["--similarity", "0.8"]),
     ({"similarity": 0.8, "max_candidates": 1}, ["--similarity", "0.8", "--max-candidates", "1"])])
def test_same_decisions_as_the_cli(tmp_path, kwargs, args):
    docs = corpus(7)
    want = cli_decisions(tmp_path, docs, *args)
    got = {}
    for d in simstore.dedup(docs, tmp_path / "py-store", chunk=64, **kwargs):
        if d.fingerprint is not None:
            got[d.id] = (d.fingerprint, d.duplicate_of, d.distance, d.similarity)
    assert got == want
    assert sum(v[1] is not None for v in got.values()) > 50, "the corpus has near-duplicates"
    # The log is the command line's, byte for byte.
    assert (tmp_path / "py-store" / "dedup.log").read_bytes() == (tmp_path / "cli-store" / "dedup.log").read_bytes()


def test_rerun_and_continuation(tmp_path):
    docs = corpus(11, 300)
    path = tmp_path / "store"
    first = list(simstore.dedup(docs[:200], path))
    assert [d.id for d in first] == [name for name, _ in docs[:200]]
    # Again over all of it: the first 200 get their decisions back (ids as
    # the log recorded them), the rest are decided against everything.
    again = list(simstore.dedup(docs, path))
    assert [d for d in again[:200] if d.fingerprint is not None] == [d for d in first if d.fingerprint is not None]
    fresh = list(simstore.dedup(docs, tmp_path / "fresh"))
    assert again == fresh
    with simstore.Store.open(path) as store:
        new = [d for d in fresh if d.fingerprint is not None and d.duplicate_of is None]
        assert store.stats()["ids"] == len(new)


def test_decisions_are_nearest_then_earliest(tmp_path):
    f = simstore.Fingerprinter()
    text = "one two three four five six seven eight nine ten eleven twelve"
    docs = [("a", text), ("b", text + " thirteen"), ("c", text), ("d", "something else entirely here now")]
    out = list(simstore.dedup(docs, tmp_path / "s", fingerprinter=f))
    assert out[0] == simstore.Decision("a", f.fingerprint(text))
    assert out[2].duplicate_of == "a" and out[2].distance == 0
    assert out[3].duplicate_of is None
    assert out[1].is_duplicate == (bin(f.fingerprint(text) ^ f.fingerprint(text + " thirteen")).count("1") <= 3)


def test_dedup_bad_input(tmp_path):
    with pytest.raises(simstore.InvalidArgumentError):
        list(simstore.dedup([("a", "x")], tmp_path / "s", similarity=1.5))
    for bad in [{"similarity": 0.8, "max_candidates": 0}, {"max_candidates": 5}]:
        with pytest.raises(simstore.InvalidArgumentError):
            list(simstore.dedup([("a", "x")], tmp_path / "s", **bad))
    with pytest.raises(simstore.InvalidTypeError):
        list(simstore.dedup([("a", "x")], tmp_path / "s", similarity=0.8, max_candidates="5"))
    assert not (tmp_path / "s").exists()
    with pytest.raises(simstore.InvalidTypeError):
        list(simstore.dedup([("a", 3)], tmp_path / "t"))
    with pytest.raises(simstore.InvalidTypeError):
        list(simstore.dedup(["just text"], tmp_path / "u"))
    with pytest.raises(simstore.PlanError):
        list(simstore.dedup([("a", "x y z")], tmp_path / "v", k=9))
    simstore.Store.create(tmp_path / "v", max_distance=2).close()
    with pytest.raises(simstore.DistanceTooLargeError):
        list(simstore.dedup([("a", "x y z")], tmp_path / "v", k=3))
    assert not (tmp_path / "v" / "dedup.log").exists()
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "notes.txt").write_text("not a store")
    with pytest.raises(simstore.NotAStoreError):
        list(simstore.dedup([("a", "x y z")], tmp_path / "w"))
    # The store is released when the generator ends early.
    gen = simstore.dedup([("a", "x y z"), ("b", "p q r")], tmp_path / "x")
    next(gen)
    gen.close()
    with simstore.Store.open(tmp_path / "x") as store:
        assert store.ids(simstore.Fingerprinter().fingerprint("x y z")) == [0]


@pytest.mark.parametrize("clash", [False, True])
def test_the_log_finds_names_whatever_their_hashes(tmp_path, monkeypatch, clash):
    # Every name with one hash (each lookup then reads names back), or the
    # real one; across reopening and a torn last line.
    from simstore import _dedup

    if clash:
        monkeypatch.setattr(_dedup, "_HASH_MASK", 0)
    else:
        monkeypatch.setattr(_dedup, "_SCAN_LINES", 2)  # slices end inside runs of native lines
    # Names without escapes in the layout the log is written in (read
    # natively at open) and others (read by JSON), mixed.
    names = ["a", "b", "a b", '"q"', "", "http://x/y?z=1", "tab\tname", "ünï ✓", "c\\d", "last"]
    lines = [
        _dedup._line(n, 0xFF, None) if i % 3 else json.dumps({"id": n, "duplicate_of": None})
        for i, n in enumerate(names)
    ]
    log = _dedup._Log(tmp_path)
    log.append(list(zip(names[:2], lines[:2])))
    log.append(list(zip(names[2:], lines[2:])))
    for _ in range(2):
        for seq, name in enumerate(names):
            assert log.logged(name) == (seq, lines[seq])
            assert log.entry(seq) == (name, lines[seq])
            assert log.name(seq) == name
        for absent in ["c", "a ", '"q', "http://x/y?z=2", "tab"]:
            assert log.logged(absent) is None
        log.close()
        log = _dedup._Log(tmp_path)
        assert len(log) == len(names)
    log.close()
    with open(tmp_path / "dedup.log", "ab") as f:
        f.write(json.dumps({"seq": len(names), "line": _dedup._line("torn", 1, None)}, separators=(",", ":")).encode()[:-3])
    log = _dedup._Log(tmp_path)
    assert len(log) == len(names) and log.logged("a") == (0, lines[0]) and log.logged("torn") is None
    log.append([("z", json.dumps({"id": "z"}))])
    assert log.logged("z") == (len(names), json.dumps({"id": "z"})) and log.logged('"q"') == (3, lines[3])
    log.close()
    # A line numbered out of turn ends the log there, in either layout.
    for bad in [_dedup._line("late", 1, None), json.dumps({"id": "late"})]:
        with open(tmp_path / "dedup.log", "ab") as f:
            f.write(json.dumps({"seq": 99, "line": bad}, separators=(",", ":")).encode() + b"\n")
        log = _dedup._Log(tmp_path)
        assert len(log) == len(names) + 1 and log.logged("late") is None
        log.close()


def test_log_lines_are_read_as_json_reads_them():
    from simstore import _dedup

    for name in ["0", "a/b c", 'quote " and \\ backslash', "tab\tnew\nline\x01", "ünï ✓ 𝄞", ""]:
        for earlier in [None, ("earlier \" one", 255, 2, 0.875)]:
            for line in [
                _dedup._line(name, 0xFF, earlier),
                json.dumps({"id": name, "fingerprint": "00000000000000ff", "duplicate_of": None}, separators=(",", ":")),
            ]:
                raw = json.dumps({"seq": 3, "line": line}, ensure_ascii=False, separators=(",", ":")).encode()
                assert _dedup._parse(raw + b"\n") == (3, name, line)
                assert _dedup._parse(json.dumps({"seq": 3, "line": line}).encode()) == (3, name, line)
                for cut in range(len(raw) - 1):
                    assert _dedup._parse(raw[:cut]) is None, (name, cut)


def test_duplicate_of_is_the_id_as_given_across_chunks(tmp_path):
    text = "one two three four five six seven"
    docs = [(1, text), (2, text), (3, "other words entirely here now"), (4, text)]
    got = [d.duplicate_of for d in simstore.dedup(docs, tmp_path / "a", chunk=1)]
    assert got == [None, 1, None, 1]
    assert all(type(x) is int for x in got if x is not None)
    # With an id that is not an int in the run, earlier chunks' are named
    # as the log records them; a later run names the earlier run's so.
    mixed = [(1, text), ("x", "more words that differ a lot"), (2, text)]
    got = [d.duplicate_of for d in simstore.dedup(mixed, tmp_path / "b", chunk=1)]
    assert got == [None, None, "1"]
    again = [d.duplicate_of for d in simstore.dedup([(9, text)], tmp_path / "a")]
    assert again == ["1"]


@pytest.mark.skipif(cli() is None, reason="no simstore command (set SIMSTORE_CLI)")
def test_a_name_repeated_within_a_chunk_is_decided_as_the_cli_does(tmp_path):
    text = "some words here for the doc"
    other = "entirely different words in this one"
    # The first "a" has no words (skipped, not logged): the second is
    # decided on its own text; the later repeats get the logged decisions.
    docs = [("a", ""), ("a", text), ("b", text), ("c", other), ("c", text), ("a", other)]
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": n, "text": t}) + "\n" for n, t in docs))
    out = subprocess.run([cli(), "dedup", str(tmp_path / "cli-store"), "--jsonl", str(src)], capture_output=True, text=True)
    assert out.returncode in (0, 3), out.stderr
    want = []
    for line in out.stdout.splitlines():
        d = json.loads(line)
        of = d["duplicate_of"]
        want.append((d["id"], int(d["fingerprint"], 16), of and of["id"], of and of["distance"]))
    got = [
        (d.id, d.fingerprint, d.duplicate_of, d.distance)
        for d in simstore.dedup(docs, tmp_path / "py-store")
        if d.fingerprint is not None
    ]
    assert got == want
    assert [g[0] for g in got] == ["a", "b", "c", "c", "a"] and got[1][2] == "a"
    assert (tmp_path / "py-store" / "dedup.log").read_bytes() == (tmp_path / "cli-store" / "dedup.log").read_bytes()


def test_a_repeated_id_names_the_earlier_document_as_its_first_decision_did(tmp_path):
    text = "one two three four five six seven eight"
    out = list(simstore.dedup([(1, text), (2, text), (2, text), (3, "")], tmp_path / "s"))
    assert out[1].duplicate_of == 1 and type(out[1].duplicate_of) is int
    assert out[2] == out[1]
    # A later run names documents of earlier runs as the log recorded them.
    again = list(simstore.dedup([(2, text)], tmp_path / "s"))
    assert again == [out[1]._replace(duplicate_of="1")]


def test_pairs_dedup_did_not_store_are_warned_of(tmp_path, monkeypatch):
    import warnings

    from simstore import _dedup

    # The log read back a few lines at a time, so that the count of
    # documents decided new is summed over several native reads.
    monkeypatch.setattr(_dedup, "_SCAN_LINES", 7)
    # A name with a quote is logged in a layout the native reader leaves
    # to the Python one: both count the documents decided new.
    quoted = ('quoted "name"', "words of a document decided new here")
    docs = corpus(5, 200) + [quoted]

    def run(path, documents, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = list(simstore.dedup(documents, path, chunk=32, **kwargs))
        return out, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]

    for kwargs in [{}, {"similarity": 0.8}]:
        path = tmp_path / f"own-{len(kwargs)}"
        out, warned = run(path, docs, **kwargs)
        assert warned == [], warned
        assert any(d.is_duplicate for d in out) and any(not d.is_duplicate for d in out)
        assert out[-1].id == quoted[0] and not out[-1].is_duplicate
        # A rerun reads the log back: still its own pairs only, also past
        # a torn last line (a kill while appending), which is dropped.
        assert run(path, docs, **kwargs)[1] == []
        seq = (path / "dedup.log").read_bytes().count(b"\n")
        with open(path / "dedup.log", "ab") as log:
            log.write(b'{"seq":%d,"line":"{\\"id\\":\\"torn' % seq)
        assert run(path, docs + [("later", "yet another new document text")], **kwargs)[1] == []
    # A pair written by `insert` beside the decisions' is warned of at the end.
    path = tmp_path / "own-0"
    with simstore.Store.open(path) as store:
        store.insert(0x0123456789ABCDEF, 7)
    _, warned = run(path, docs)
    assert len(warned) == 1 and "pairs it did not write" in warned[0], warned
    # So is a store filled by `insert` alone.
    plain = tmp_path / "plain"
    with simstore.Store.create(plain) as store:
        store.insert(0x0123456789ABCDEF, 7)
    _, warned = run(plain, docs[:10])
    assert len(warned) == 1 and "holds" in warned[0], warned
