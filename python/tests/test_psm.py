"""Probabilistic queries (PSM) from Python: one-table stores, volatilities
from the fingerprinter, answers within the exact ones."""

from __future__ import annotations

import numpy as np
import pytest

import simstore
from conftest import Oracle, random_fps


def test_probabilistic_answers_are_true_matches(path, rng):
    fps = random_fps(rng, 5000)
    oracle = Oracle()
    with simstore.Store.create(path, tables=1, expected_size=5000) as store:
        assert store.stats()["tables"] == 1
        store.insert_many(fps, np.arange(5000, dtype=np.uint64))
        for i, f in enumerate(fps):
            oracle.insert(f, i)
        queries = fps[:300].copy()
        vol = np.full((300, 64), 0x30, dtype=np.uint8)
        for i in range(300):
            a, b = rng.choice(64, size=2, replace=False)
            queries[i] ^= np.uint64(1) << np.uint64(int(a))
            queries[i] ^= np.uint64(1) << np.uint64(int(b))
            vol[i, a] = vol[i, b] = 0x08  # the flipped bits are the volatile ones
        found = 0
        for i, q in enumerate(queries):
            want = oracle.query(int(q), 3)
            got = [(m.fingerprint, m.distance, m.ids) for m in store.query_probabilistic(int(q), vol[i].tobytes())]
            assert all(m in want for m in got)
            exhaustive = store.query_probabilistic(int(q), vol[i].tobytes().hex(), recall=1.0)
            assert [(m.fingerprint, m.distance, m.ids) for m in exhaustive] == want
            found += len(got)
        assert found == sum(len(oracle.query(int(q), 3)) for q in queries)
        batch = store.query_many(queries, volatility=vol)
        one_by_one = [(i, m.fingerprint, m.distance, m.ids[0]) for i, q in enumerate(queries) for m in store.query_probabilistic(int(q), vol[i].tobytes())]
        assert list(zip(batch.query.tolist(), batch.fingerprint.tolist(), batch.distance.tolist(), batch.id.tolist())) == one_by_one
        firsts = store.query_many(queries, volatility=vol, first=True, max_probes=1)
        assert len(set(firsts.query.tolist())) == len(firsts.query)


def test_volatility_of_documents():
    f = simstore.Fingerprinter()
    text = "one two three four five six seven eight nine ten eleven twelve thirteen"
    v = f.volatility(text)
    assert isinstance(v, bytes) and len(v) == 64
    w = f.weights(text)
    # Smaller sums are likelier to flip: smaller bytes.
    order = np.argsort(np.abs(w), kind="stable")
    assert v[order[0]] <= v[order[-1]]
    assert f.volatility("") is None


def test_bad_volatilities_and_budgets(path):
    with simstore.Store.create(path, tables=1) as store:
        store.insert(5, 1)
        for bad in [b"\x00" * 63, "zz" * 64, "00" * 63]:
            with pytest.raises(simstore.InvalidArgumentError):
                store.query_probabilistic(5, bad)
        with pytest.raises(simstore.InvalidTypeError):
            store.query_probabilistic(5, 12)
        with pytest.raises(simstore.InvalidArgumentError):
            store.query_probabilistic(5, b"\x08" * 64, recall=1.5)
        with pytest.raises(simstore.InvalidArgumentError):
            store.query_probabilistic(5, b"\x08" * 64, max_probes=0)
        with pytest.raises(simstore.InvalidArgumentError):
            store.query_many(np.array([5, 6], dtype=np.uint64), volatility=np.zeros((1, 64), dtype=np.uint8))
        assert store.query_probabilistic(5, b"\x08" * 64)[0].ids == [1]


def test_volatility_of_many_documents(path):
    f = simstore.Fingerprinter()
    texts = [f"document {i} about the words {i % 7} and {i % 11} and more words here" for i in range(300)] + [""]
    many = f.volatility_many(texts)
    assert many.dtype == np.uint8 and many.shape == (301, 64)
    for i in (0, 17, 299):
        assert many[i].tobytes() == f.volatility(texts[i])
    assert (many[300] == 8).all()
    with pytest.raises(simstore.InvalidTypeError):
        f.volatility_many("one text")
    fps = f.fingerprint_many(texts[:300])
    with simstore.Store.create(path, tables=1) as store:
        store.insert_many(fps, np.arange(300, dtype=np.uint64))
        got = store.query_many(fps, k=0, volatility=many[:300])
        assert sorted(set(got.query.tolist())) == list(range(300))
