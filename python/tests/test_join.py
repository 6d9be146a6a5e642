"""simstore.Join, the kernel of the Spark joins, against brute force."""

from __future__ import annotations

import numpy as np
import pytest

import simstore

from conftest import brute_pairs, clustered_fps, popcount, random_fps


@pytest.mark.parametrize("k,blocks", [(1, 2), (3, 4), (3, 5), (4, 6)])
def test_tasks_by_key_find_every_pair_once(rng, k, blocks):
    fps = np.concatenate([clustered_fps(rng, 3000, centres=30), random_fps(rng, 1000)])
    join = simstore.Join(k, blocks=blocks)
    assert join.max_distance == k and join.blocks == blocks
    got = []
    for t in range(join.tables):
        keys = join.keys(fps, t)
        assert keys.dtype == np.uint64 and int(keys.max()) < 2 ** join.prefix_bits(t)
        # Four tasks, each given the fingerprints of its keys.
        for task in range(4):
            mine = fps[keys % np.uint64(4) == np.uint64(task)]
            a, b, d = join.self_pairs(mine, t)
            got.extend(zip(a.tolist(), b.tolist(), d.tolist()))
    want = brute_pairs(fps, k)
    assert len(want) > 100
    assert len(got) == len(set(got))
    assert set(got) == want


def test_index_answers_queries_exactly(rng):
    batch = clustered_fps(rng, 2000, centres=20)
    queries = np.concatenate([batch[:300] ^ np.uint64(0b1001), random_fps(rng, 300)])
    index = simstore.Join(3, expected_size=len(batch)).index(batch)
    assert len(index) == len(np.unique(batch))
    q, fp, d = index.query_many(queries)
    got = set(zip(q.tolist(), fp.tolist(), d.tolist()))
    assert len(got) == len(q)
    want = set()
    u = np.unique(batch)
    for i, x in enumerate(queries):
        dist = popcount(u ^ x)
        want |= {(i, int(u[j]), int(dist[j])) for j in np.nonzero(dist <= 3)[0]}
    assert got == want


def test_cross_pairs():
    join = simstore.Join(3, blocks=4)
    a, b, d = join.cross_pairs([1, 2, 3], [1, 7, 0xF << 60], 0)
    pairs = set(zip(a.tolist(), b.tolist(), d.tolist()))
    # Every (left, right) within 3 whose first shared table is 0, never a
    # fingerprint with itself.
    assert pairs == {(1, 7, 2), (2, 1, 2), (2, 7, 2), (3, 1, 1), (3, 7, 1)}


def test_bad_input():
    with pytest.raises(simstore.PlanError):
        simstore.Join(3, blocks=3)
    with pytest.raises(simstore.Error):
        simstore.Join(9)
    join = simstore.Join(3)
    with pytest.raises(simstore.InvalidArgumentError, match="table 4 does not exist"):
        join.keys([1], 4)
    with pytest.raises(simstore.InvalidTypeError):
        join.self_pairs(np.array([1, 2], dtype=np.int64), 0)
    with pytest.raises(simstore.InvalidArgumentError):
        join.self_pairs([-1], 0)
    assert repr(join) == "Join(max_distance=3, blocks=4, tables=4)"
