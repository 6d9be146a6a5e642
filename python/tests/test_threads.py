"""A store shared by Python threads: queries run while another thread
inserts, and see every write acknowledged before they started."""

from __future__ import annotations

import threading
import time

import numpy as np

import simstore
from conftest import random_fps


def test_queries_while_another_thread_inserts(path, rng):
    fps = random_fps(rng, 20_000)
    with simstore.Store.create(path, durability="buffered", merge_threshold=2048) as store:
        store.insert_many(fps[:10_000], np.arange(10_000, dtype=np.uint64))
        acknowledged = [10_000]
        failures: list = []
        done = threading.Event()

        def writer():
            try:
                for i in range(10_000, 20_000, 100):
                    store.insert_many(fps[i : i + 100], np.arange(i, i + 100, dtype=np.uint64))
                    acknowledged[0] = i + 100
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(e)
            finally:
                done.set()

        def reader(seed):
            local = np.random.default_rng(seed)
            try:
                while not done.is_set():
                    upto = acknowledged[0]
                    pick = local.integers(0, upto, size=64)
                    got = store.query_many(fps[pick], 0)
                    assert got.query.tolist() == list(range(64)), "an acknowledged write is missing"
                    assert got.id.tolist() == pick.tolist()
                    one = int(pick[0])
                    assert store.query(int(fps[one]), 0)[0].ids == [one]
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(e)

        threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(s,)) for s in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert len(store) == 20_000
        got = store.query_many(fps, 0)
        assert got.id.tolist() == list(range(20_000))


def test_gil_released_during_long_calls(path, rng):
    """Another Python thread runs while one is inside a batch query: it
    counts, during the call, at a good share of the rate it counts at
    alone (holding the GIL through the call, it would count nothing)."""
    fps = random_fps(rng, 200_000)
    queries = np.tile(fps, 5)
    with simstore.Store.create(path, query_threads=1) as store:
        store.insert_many(fps, np.arange(len(fps), dtype=np.uint64))
        store.wait_warm()
        ticks = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                ticks[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.05)
        before, started = ticks[0], time.perf_counter()
        time.sleep(0.2)
        alone = (ticks[0] - before) / (time.perf_counter() - started)
        before, started = ticks[0], time.perf_counter()
        store.query_many(queries, 3)
        during = (ticks[0] - before) / (time.perf_counter() - started)
        stop.set()
        t.join()
        assert during > 0.2 * alone, (during, alone)
