"""Every query path against brute force, with ids, on random and clustered
data, across deletes, compaction, level merges and reopen."""

from __future__ import annotations

import numpy as np
import pytest

import simstore
from conftest import Oracle, clustered_fps, flip, random_fps


def check(store: simstore.Store, oracle: Oracle, queries: np.ndarray, k: int) -> None:
    # One at a time: all matches and first match.
    for fp in queries[:300]:
        want = oracle.query(int(fp), k)
        got = [(m.fingerprint, m.distance, m.ids) for m in store.query(int(fp), k)]
        assert got == want, hex(int(fp))
        first = store.query_first(int(fp), k)
        if want:
            assert first is not None
            assert (first.fingerprint, first.distance, first.ids) in want
        else:
            assert first is None
    # A whole array: the rows brute force gives, in the same order.
    got = store.query_many(queries, k)
    assert len({len(c) for c in got}) == 1
    assert got.query.dtype == np.int64 and got.fingerprint.dtype == np.uint64
    assert got.distance.dtype == np.int32 and got.id.dtype == np.uint64
    rows = list(zip(got.query.tolist(), got.fingerprint.tolist(), got.distance.tolist(), got.id.tolist()))
    assert rows == oracle.rows(queries, k)
    # First matches of the array: one fingerprint per query that has any.
    firsts = store.query_many(queries, k, first=True)
    found = {}
    for q, f, d, i in zip(firsts.query.tolist(), firsts.fingerprint.tolist(), firsts.distance.tolist(), firsts.id.tolist()):
        found.setdefault(q, (f, d, []))
        assert found[q][:2] == (f, d), "one fingerprint per query"
        found[q][2].append(i)
    for q, fp in enumerate(queries):
        want = oracle.query(int(fp), k)
        if not want:
            assert q not in found
            continue
        f, d, ids = found[q]
        assert (f, d, [i for i in ids if i != simstore.NO_ID]) in want
    # Everything stored, in order.
    fps, ids = store.export()
    assert fps.dtype == np.uint64 and ids.dtype == np.uint64
    want_rows = []
    for f in sorted(oracle.pairs):
        stored = oracle.ids(f)
        want_rows += [(f, i) for i in stored] if stored else [(f, simstore.NO_ID)]
    assert list(zip(fps.tolist(), ids.tolist())) == want_rows


def workload(rng, n: int, clustered: bool):
    fps = clustered_fps(rng, n) if clustered else random_fps(rng, n)
    ids = np.arange(1, n + 1, dtype=np.uint64)
    return fps, ids


def queries_for(rng, fps: np.ndarray, n: int) -> np.ndarray:
    near = flip(rng, fps[rng.integers(0, len(fps), size=n // 2)], 4)
    return np.concatenate([near, random_fps(rng, n - n // 2)])


@pytest.mark.parametrize("n", [1, 1_000, 30_000])
@pytest.mark.parametrize("clustered", [False, True])
def test_queries_match_brute_force(path, rng, n, clustered):
    fps, ids = workload(rng, n, clustered)
    oracle = Oracle()
    with simstore.Store.create(path, max_distance=4, merge_threshold=1024, durability="buffered") as store:
        # A bulk load, then small writes (through the levels), with a few
        # fingerprints that carry several ids and some with none.
        half = max(n - 3000, n // 2)
        store.insert_many(fps[:half], ids[:half])
        for f, i in zip(fps[:half], ids[:half]):
            oracle.insert(f, i)
        for f, i in zip(fps[half:], ids[half:]):
            store.insert(int(f), int(i))
            oracle.insert(f, i)
        extra = fps[rng.integers(0, n, size=min(n, 50))]
        store.insert_many(extra, np.arange(10**9, 10**9 + len(extra), dtype=np.uint64))
        for j, f in enumerate(extra):
            oracle.insert(f, 10**9 + j)
        bare = random_fps(rng, 20)
        store.insert_many(bare)
        for f in bare:
            oracle.insert(f)
        queries = queries_for(rng, fps, 600)
        for k in (0, 3, 4):
            check(store, oracle, queries, k)
        # Deletes: pairs and whole fingerprints.
        for f, i in zip(fps[: n // 10], ids[: n // 10]):
            assert store.delete(int(f), int(i)) == oracle.delete(f, i)
        gone = fps[n // 10 : n // 5]
        done = store.delete_many(gone)
        assert done.tolist() == [oracle.delete(f) for f in gone]
        check(store, oracle, queries, 3)
        store.compact()
        check(store, oracle, queries, 3)
        assert store.verify()["ok"]
    with simstore.Store.open(path) as store:
        check(store, oracle, queries, 4)
        assert len(store) == len(oracle.pairs)
        stats = store.stats()
        assert stats["fingerprints"] == len(oracle.pairs)
        assert stats["max_distance"] == 4
        assert store.verify() ["problems"] == []


def test_ids_of_a_fingerprint(path):
    with simstore.Store.create(path) as store:
        store.insert(42, 7)
        store.insert(42, 3)
        assert store.ids(42) == [3, 7]
        assert store.query(42, 0)[0] == store.query(42, 0)[0]
        assert repr(store.query(42, 0)[0]) == "Match(fingerprint=0x000000000000002a, distance=0, ids=[3, 7])"
        assert store.delete(42, 3) and store.ids(42) == [7]
        assert not store.delete(42, 3)
        assert store.ids(43) == []


def test_inputs_of_every_kind(path):
    import array

    with simstore.Store.create(path) as store:
        store.insert_many([1, 2, 3], [10, 20, 30])
        store.insert_many(array.array("Q", [4]), array.array("Q", [40]))
        store.insert_many(np.array([5, 6], dtype=np.uint64)[::-1], memoryview(np.array([60, 50], dtype=np.uint64)))
        store.insert(np.uint64(2**64 - 1), np.uint64(7))
        got = store.query_many(np.arange(1, 7, dtype=np.uint64), 0)
        assert got.id.tolist() == [10, 20, 30, 40, 50, 60]
        assert store.query_many(range(1, 3), 0).id.tolist() == [10, 20]
        assert store.ids(2**64 - 1) == [7]
        empty = store.query_many(np.array([], dtype=np.uint64))
        assert all(len(c) == 0 for c in empty)


@pytest.mark.parametrize("durability", ["sync", "buffered"])
def test_writes_survive_close(path, durability):
    with simstore.Store.create(path, durability=durability) as store:
        fps = [(i * 0x9E3779B97F4A7C15) % 2**64 for i in range(1000)]
        store.insert_many(fps, range(1000))
        store.insert(fps[7], 7000)
    with simstore.Store.open_or_create(path) as store:
        assert len(store) == 1000
        assert store.ids(fps[5]) == [5]
        assert store.ids(fps[7]) == [7, 7000]


def test_max_ids_lists_the_smallest_and_counts_all(path, rng):
    # A fingerprint with 5,000 ids (most merged into its id block, some
    # removed and added since), its neighbours with one id or none: every
    # query method with max_ids gives the full listing cut, and id_count.
    hot = 0x0123456789ABCDEF
    with simstore.Store.create(path, tables=1) as store:
        store.insert_many(np.full(5000, hot, dtype=np.uint64), np.arange(100, 5100, dtype=np.uint64))
        others = random_fps(rng, 2000)
        store.insert_many(others, np.arange(1, 2001, dtype=np.uint64))
        store.insert_many(flip(rng, np.full(20, hot, dtype=np.uint64), 2))
        store.compact()
        for i in range(100, 110):
            assert store.delete(hot, i)
        for i in (5, 3000, 10**12):
            store.insert(hot, i)
        volatility = bytes([10] * 64)
        queries = np.concatenate([flip(rng, np.full(30, hot, dtype=np.uint64), 3), flip(rng, others[:30], 2)])
        for limit in (0, 1, 3, 10**6):
            full = store.query_many(queries, 3)
            cut = store.query_many(queries, 3, max_ids=limit)
            want, seen = [], {}
            for row in zip(full.query.tolist(), full.fingerprint.tolist(), full.distance.tolist(), full.id.tolist()):
                seen[row[:2]] = seen.get(row[:2], 0) + 1
                if seen[row[:2]] <= max(limit, 1):
                    # With none listed, one row a match, without an id.
                    want.append(row if limit else row[:3] + (simstore.NO_ID,))
            assert list(zip(cut.query.tolist(), cut.fingerprint.tolist(), cut.distance.tolist(), cut.id.tolist())) == want
            for fp in queries[:40].tolist():
                for method in (
                    lambda **kw: store.query(fp, 3, **kw),
                    lambda **kw: [m for m in [store.query_first(fp, 3, **kw)] if m is not None],
                    lambda **kw: store.query_probabilistic(fp, volatility, 3, **kw),
                ):
                    every = method()
                    got = method(max_ids=limit)
                    assert [(m.fingerprint, m.distance, m.ids, m.id_count) for m in got] == [
                        (m.fingerprint, m.distance, m.ids[:limit], len(m.ids)) for m in every
                    ]
                    assert all(m.id_count == len(m.ids) for m in every)
            # The same rows with the counts of their fingerprints' ids.
            rows, counts = store.query_many(queries, 3, max_ids=limit, return_counts=True)
            assert [np.array_equal(a, b) for a, b in zip(rows, cut)] == [True] * 4
            assert counts.dtype == np.uint64 and len(counts) == len(cut.id)
            assert counts.tolist() == [len(store.ids(fp)) for fp in cut.fingerprint.tolist()]
            firsts, first_counts = store.query_many(queries, 3, first=True, max_ids=limit, return_counts=True)
            assert first_counts.tolist() == [len(store.ids(fp)) for fp in firsts.fingerprint.tolist()]
        assert max(counts.tolist()) == 5000 - 10 + 2
        assert 0 in counts.tolist()  # the neighbours stored without an id
        assert isinstance(store.query_many(queries, 3), simstore.QueryMatches)
        assert [m.id_count for m in store.query(hot, 0, max_ids=1)] == [5000 - 10 + 2]  # 3000 was stored already
        assert store.query(hot, 0, max_ids=1)[0].ids == [5]
        assert [(m.ids, m.id_count) for m in store.query(hot, 0, max_ids=0)] == [([], 5000 - 10 + 2)]
        with pytest.raises(simstore.InvalidArgumentError):
            store.query(hot, 0, max_ids=-1)


def test_export_rebuilds_a_store_with_other_options(path, tmp_path, rng):
    fps = clustered_fps(rng, 5000)
    with simstore.Store.create(path, merge_threshold=512) as store:
        store.insert_many(fps[:4000], np.arange(4000, dtype=np.uint64))
        for j, f in enumerate(fps[4000:]):
            store.insert(int(f), 10**6 + j)
        store.insert_many(random_fps(rng, 30))
        store.delete_many(fps[:100])
        f, i = store.export()
    assert len(f) == len(i) and np.all(f[:-1] <= f[1:])
    with simstore.Store.create(tmp_path / "one", tables=1, expected_size=10_000) as one:
        one.insert_many(f[i != simstore.NO_ID], i[i != simstore.NO_ID])
        one.insert_many(f[i == simstore.NO_ID])
        g, j = one.export()
        assert g.tolist() == f.tolist() and j.tolist() == i.tolist()
        assert len(one) == len(np.unique(f))
