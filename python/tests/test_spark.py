"""simstore.spark on a real multi-process Spark: a local cluster of two
worker processes with one executor JVM each (each with its own Python
workers), against brute force and the single-machine store."""

from __future__ import annotations

import glob
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

# The README's test command sets SIMSTORE_REQUIRE_SPARK: there a missing
# pyspark fails the suite instead of skipping these tests.
if os.environ.get("SIMSTORE_REQUIRE_SPARK"):
    import pyspark  # noqa: F401
else:
    pytest.importorskip("pyspark")

import simstore  # noqa: E402
from simstore import spark as sss  # noqa: E402

from conftest import brute_pairs, clustered_fps, flip, popcount, random_fps  # noqa: E402


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    work = tmp_path_factory.mktemp("spark-work")
    session = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("simstore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.local.dir", str(work))
        .config("spark.worker.dir", str(work))
        .config("spark.task.maxFailures", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.setCheckpointDir(str(work / "checkpoints"))
    yield session
    session.stop()


def frame(spark, fps: np.ndarray, ids=None, hex_=False):
    import pandas as pd

    ids = np.arange(len(fps), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    pdf = pd.DataFrame({"id": ids, "fp": np.asarray(fps, dtype=np.uint64).view(np.int64)})
    df = spark.createDataFrame(pdf).repartition(3)
    if hex_:
        df = df.select("id", sss.to_hex("fp").alias("fp"))
    return df


def brute_row_pairs(fps: np.ndarray, ids: np.ndarray, k: int) -> set:
    fps = np.asarray(fps, dtype=np.uint64)
    out = set()
    for i in range(len(fps) - 1):
        d = popcount(fps[i + 1 :] ^ fps[i])
        for j in np.nonzero(d <= k)[0]:
            a, b = int(ids[i]), int(ids[i + 1 + j])
            if a != b:
                out.add((min(a, b), max(a, b), int(d[j])))
    return out


def u64(v) -> int:
    return int(v) & (2**64 - 1)


def as_set(df, hex_=False) -> list:
    conv = (lambda v: int(v, 16)) if hex_ else u64
    return [(conv(r[0]), conv(r[1]), r[2]) for r in df.collect()]


def dataset(rng, n):
    """Uniform fingerprints, near copies of a fifth of them, exact repeats
    and a family of clustered ones."""
    base = random_fps(rng, n)
    near = flip(rng, base[: n // 5], 4)
    fam = clustered_fps(rng, n // 4, centres=8)
    return np.concatenate([base, near, base[: n // 10], fam])


@pytest.mark.parametrize("k", [0, 1, 3, 4])
@pytest.mark.parametrize("hex_", [False, True])
def test_fingerprint_join_equals_brute_force(spark, rng, k, hex_):
    fps = dataset(rng, 1500)
    got = as_set(sss.near_duplicate_fingerprints(frame(spark, fps, hex_=hex_), "fp", k), hex_)
    want = brute_pairs(fps, k)
    # At k = 0 distinct fingerprints are never pairs: nothing must come out.
    assert len(want) > 100 or k == 0
    assert len(got) == len(set(got)), "a pair came out twice"
    assert set(got) == want
    assert all(a < b for a, b, _ in got)


def test_plans_with_more_blocks_agree(spark, rng):
    fps = dataset(rng, 1500)
    want = brute_pairs(fps, 3)
    for blocks in (4, 5, 6):
        got = as_set(sss.near_duplicate_fingerprints(frame(spark, fps), "fp", 3, blocks=blocks, partitions=5))
        assert len(got) == len(set(got))
        assert set(got) == want, blocks


def test_row_pairs_equal_brute_force_and_the_store(spark, rng, tmp_path):
    fps = dataset(rng, 1200)
    ids = rng.permutation(len(fps)).astype(np.int64) * 7 - 3000  # negative ids too
    df = frame(spark, fps, ids)
    got = [tuple(r) for r in sss.near_duplicate_pairs(df, "fp", "id", 3).collect()]
    want = brute_row_pairs(fps, ids, 3)
    assert len(got) == len(set(got))
    assert set(got) == want
    assert all(a < b for a, b, _ in got)
    # The single-machine store: every stored fingerprint queried against
    # the others gives the same pairs of rows.
    with simstore.Store.create(tmp_path / "s", expected_size=len(fps)) as store:
        store.insert_many(fps, ids.view(np.uint64) + np.uint64(0))
        m = store.query_many(fps, 3)
    sid = m.id.view(np.int64)
    qid = ids[m.query]
    from_store = {(int(min(a, b)), int(max(a, b)), int(d)) for a, b, d in zip(qid, sid, m.distance) if a != b}
    assert from_store == set(got)


def test_real_documents(spark):
    files = sorted(glob.glob("/usr/share/doc/*/copyright"))[:600]
    if len(files) < 50:
        pytest.skip("needs the Debian documentation of the machine image")
    texts = [open(f, errors="replace").read() for f in files]
    import pandas as pd

    df = spark.createDataFrame(pd.DataFrame({"id": np.arange(len(texts)), "text": texts}))
    with_fp = sss.fingerprint(df, "text", volatility_col="vol").cache()
    rows = with_fp.select("id", "fingerprint", "vol").toPandas().sort_values("id")
    fper = simstore.Fingerprinter()
    for i, text in enumerate(texts):
        fp = fper.fingerprint(text)
        got = rows["fingerprint"].iloc[i]
        if fp is None:
            assert pd.isna(got)
        else:
            assert u64(got) == fp
            assert bytes(rows["vol"].iloc[i]) == fper.volatility(text)
    fps = np.array([u64(v) for v in rows["fingerprint"].dropna()], dtype=np.uint64)
    ids = rows["id"][rows["fingerprint"].notna()].to_numpy()
    got = {tuple(r) for r in sss.near_duplicate_pairs(with_fp, "fingerprint", "id", 3).collect()}
    want = brute_row_pairs(fps, ids, 3)
    assert len(want) > 20, "the copyright files have near-duplicates"
    assert got == want


def test_match_against_equals_brute_force(spark, rng):
    collection = dataset(rng, 3000)
    batch = np.concatenate([flip(rng, collection[rng.integers(0, len(collection), 300)], 3), random_fps(rng, 200)])
    cdf = frame(spark, collection)
    bdf = frame(spark, batch, ids=np.arange(len(batch)) + 10**6)
    got = sss.match_against(bdf, cdf, 3, batch_fp="fp", collection_fp="fp", batch_id="id", collection_id="id")
    assert got.columns == ["batch_fp", "collection_fp", "distance", "batch_id", "collection_id"]
    rows = [(u64(a), u64(b), d, i, j) for a, b, d, i, j in got.collect()]
    want = set()
    for i, q in enumerate(batch):
        d = popcount(collection ^ q)
        for j in np.nonzero(d <= 3)[0]:
            want.add((int(q), int(collection[j]), int(d[j]), i + 10**6, int(j)))
    assert len(rows) == len(set(rows))
    assert set(rows) == want
    # Without ids: one row per (batch fingerprint, collection row), hex in, hex out.
    hx = sss.match_against(frame(spark, batch, hex_=True), frame(spark, collection, hex_=True), 3, batch_fp="fp", collection_fp="fp")
    plain = {(int(a, 16), int(b, 16), d) for a, b, d in hx.collect()}
    assert plain == {(q, c, d) for q, c, d, _, _ in want}


def components(fps: np.ndarray, k: int) -> dict:
    """Union-find over distinct fingerprints: fingerprint -> root."""
    u = [int(x) for x in np.unique(fps)]
    parent = {x: x for x in u}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, _ in brute_pairs(fps, k):
        parent[find(a)] = find(b)
    return {x: find(x) for x in u}


def check_dedup(result, fps: np.ndarray, ids: np.ndarray, k: int, keep="earliest"):
    comp = components(fps, k)
    best = {}
    for fp, i in zip(fps, ids):
        c = comp[int(fp)]
        if c not in best or (i < best[c] if keep == "earliest" else i > best[c]):
            best[c] = int(i)
    got = {int(r["id"]): r["duplicate_of"] for r in result.select("id", "duplicate_of").collect()}
    assert len(got) == len(ids)
    for fp, i in zip(fps, ids):
        kept = best[comp[int(fp)]]
        assert got[int(i)] == (None if kept == int(i) else kept), (int(i), kept)


@pytest.mark.parametrize("keep", ["earliest", "latest"])
def test_dedup_is_connected_components(spark, rng, keep):
    fps = dataset(rng, 1000)
    # A chain: each link within 3 bits of the next, the ends far apart.
    chain = [int(random_fps(rng, 1)[0])]
    for link in range(12):
        chain.append(chain[-1] ^ (0b111 << (3 * link)))
    fps = np.concatenate([fps, np.array(chain, dtype=np.uint64)])
    ids = rng.permutation(len(fps)).astype(np.int64)
    result = sss.dedup(frame(spark, fps, ids), "fp", "id", 3, keep=keep)
    assert "duplicate_of" in result.columns and "fp" in result.columns
    check_dedup(result, fps, ids, 3, keep)


def test_skewed_input(spark, rng):
    """100K rows of one fingerprint (the empty page) beside a uniform
    background: the hot fingerprint reaches the shuffle once per input
    partition, and the answers stay exact."""
    hot = np.uint64(0x0123_4567_89AB_CDEF)
    background = dataset(rng, 2000)
    neighbours = flip(rng, np.full(50, hot, dtype=np.uint64), 3)
    fps = np.concatenate([np.full(100_000, hot, dtype=np.uint64), background, neighbours])
    ids = np.arange(len(fps), dtype=np.int64)
    df = frame(spark, fps, ids).repartition(6).cache()
    got = as_set(sss.near_duplicate_fingerprints(df, "fp", 3))
    assert set(got) == brute_pairs(fps, 3) and len(got) == len(set(got))
    # What the tasks compare: nowhere near the 100K hot rows.
    groups = sss._task_groups(df.select("fp"), 3)
    assert sum(groups) < 4 * 4000 and max(groups) < 4000, max(groups)
    result = sss.dedup(df, "fp", "id", 3)
    check_dedup(result, fps, ids, 3)


def test_hot_prefix_is_split(spark, rng):
    """20,000 distinct fingerprints sharing the key of one table (and near
    copies among them) go to many tasks, each comparing two chunks; the
    answer stays exact."""
    prefix = np.uint64(0xABCD << 48)
    shared = (random_fps(rng, 16_000) & np.uint64(2**48 - 1)) | prefix
    near = flip(rng, shared[:4000], 3) & np.uint64(2**48 - 1) | prefix
    fps = np.concatenate([shared, near, shared[:300], dataset(rng, 2000)])
    df = frame(spark, fps).cache()
    whole = sss._task_groups(df.select("fp"), 3, hot_key_rows=10**9)
    split = sss._task_groups(df.select("fp"), 3, hot_key_rows=2000)
    assert max(whole) > 19_000
    assert max(split) <= 2500, max(split)
    got = as_set(sss.near_duplicate_fingerprints(df, "fp", 3, hot_key_rows=2000))
    assert len(got) == len(set(got))
    assert set(got) == brute_pairs(fps, 3)
    rows = {tuple(r) for r in sss.near_duplicate_pairs(df, "fp", "id", 3, hot_key_rows=2000).collect()}
    assert rows == brute_row_pairs(fps, np.arange(len(fps)), 3)
    result = sss.dedup(df.withColumnRenamed("id", "doc"), "fp", "doc", 3, hot_key_rows=2000)
    check_dedup(result.withColumnRenamed("doc", "id"), fps, np.arange(len(fps)), 3)


def executor_pids(app_id: str) -> list:
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and app_id.encode() in cmd:
            pids.append(int(d))
    return pids


def test_executor_killed_mid_job(spark, rng, tmp_path):
    """An executor JVM SIGKILLed while the join's tasks run: Spark retries
    them elsewhere (and recomputes lost shuffle output), and the answer is
    unchanged."""
    fps = dataset(rng, 40_000)
    df = frame(spark, fps)
    sc = spark.sparkContext
    result = {}

    def run():
        try:
            sc.setJobGroup("killed", "join with a killed executor")
            result["rows"] = as_set(sss.near_duplicate_fingerprints(df, "fp", 3, partitions=40))
        except Exception as e:  # noqa: BLE001 - reported below
            result["error"] = e

    worker = threading.Thread(target=run)
    worker.start()
    killed = None
    deadline = time.time() + 120
    while time.time() < deadline and worker.is_alive():
        tracker = sc.statusTracker()
        running = [
            s for s in (tracker.getStageInfo(i) for i in tracker.getActiveStageIds())
            # The join's own stage (40 tasks, reading the shuffle), part done.
            if s and s.numTasks == 40 and s.numActiveTasks > 0 and s.numCompletedTasks > 0
        ]
        if running:
            pids = executor_pids(sc.applicationId)
            if pids:
                killed = pids[0]
                os.kill(killed, signal.SIGKILL)
                break
        time.sleep(0.05)
    worker.join(300)
    assert killed is not None, "the job ended before an executor could be killed"
    assert "error" not in result, result.get("error")
    # The answer equals the single-machine store's, and brute force on a
    # part of the data.
    with simstore.Store.create(tmp_path / "s", expected_size=len(fps)) as store:
        store.insert_many(fps)
        m = store.query_many(fps, 3)
    q = fps[m.query]
    from_store = {(int(min(a, b)), int(max(a, b)), int(d)) for a, b, d in zip(q, m.fingerprint, m.distance) if a != b}
    got = result["rows"]
    assert len(got) == len(set(got))
    assert set(got) == from_store
    assert brute_pairs(fps[:3000], 3) <= from_store


def test_bad_input(spark):
    import pandas as pd

    df = spark.createDataFrame(pd.DataFrame({"id": [1, 2], "fp": [1.0, 2.0]}))
    with pytest.raises(TypeError, match="bigint"):
        sss.near_duplicate_fingerprints(df, "fp", 3)
    with pytest.raises(ValueError, match="no column"):
        sss.near_duplicate_fingerprints(df, "nope", 3)
    good = frame(spark, np.array([1, 2, 3], dtype=np.uint64))
    for k in (-1, 9, 2.5, True):
        with pytest.raises(ValueError, match="k must be"):
            sss.near_duplicate_fingerprints(good, "fp", k)
    with pytest.raises(ValueError, match="keep"):
        sss.dedup(good, "fp", "id", 3, keep="middle")
    bad_hex = spark.createDataFrame(pd.DataFrame({"id": [1], "fp": ["xyz"]}))
    with pytest.raises(Exception, match="not a 16-hex-digit fingerprint: xyz"):
        sss.near_duplicate_fingerprints(bad_hex, "fp", 3).collect()
    # Nulls take part in nothing.
    nulls = spark.createDataFrame([(1, None), (2, 5), (3, 4)], "id long, fp long")
    assert [tuple(r) for r in sss.near_duplicate_pairs(nulls, "fp", "id", 1).collect()] == [(2, 3, 1)]
    d = {r["id"]: r["duplicate_of"] for r in sss.dedup(nulls, "fp", "id", 1).collect()}
    assert d == {1: None, 2: None, 3: 2}
    with_null_ids = spark.createDataFrame([(None, 5), (7, 4)], "id long, fp long")
    got = sss.match_against(nulls, with_null_ids, 1, batch_fp="fp", collection_fp="fp", batch_id="id", collection_id="id")
    assert sorted(tuple(r) for r in got.collect()) == [(4, 4, 0, 3, 7), (5, 4, 1, 2, 7)]
