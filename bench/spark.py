#!/usr/bin/env python3
"""The exact self-join of N (fingerprint, id) rows on Spark against the
single-process batch path, on one machine, in one run.

* Data: N rows with sequential ids, shuffled; 90% uniform fingerprints,
  9% near copies of them (1-3 bits flipped), 1% exact repeats. Written
  once as Parquet (16 files).
* Single process: ``Store.insert_many`` of the rows into an empty store,
  then ``Store.query_many`` of every row's fingerprint in calls of 2M
  (the batch path, tables in memory), on one query thread: one core, like one executor;
  the pairs of rows are the answers with ``id_a < id_b``.
* Spark: ``simstore.spark.near_duplicate_pairs`` on a local cluster of
  E executor processes with one core each (``local-cluster[E,1,MB]``),
  reading the Parquet files and writing the pairs as Parquet; wall time,
  shuffle bytes (from Spark's REST API), and the pair count, which must
  equal the single process's.

With ``--extras``, each cluster also runs ``dedup`` of the rows and
``match_against`` of every tenth row (by id) against all of them (without
ids: one row per batch fingerprint and collection row).

Prints a Markdown table; ``--json`` writes the figures.

    python3 bench/spark.py --size 10000000 --executors 1 2

Needs the package with its Spark extra (``pip install './python[spark]'``)
and Java 17.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

import numpy as np


#: Queries per `query_many` call of the single process.
QUERY_SLICE = 2_000_000


def dataset(n: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    uniform = n * 90 // 100
    near = n * 9 // 100
    fps = rng.integers(0, 2**64, size=uniform, dtype=np.uint64, endpoint=False)
    copies = fps[rng.integers(0, uniform, size=near)].copy()
    for _ in range(3):
        bit = rng.integers(0, 64, size=near).astype(np.uint64)
        flip = rng.random(near) < 0.67
        copies[flip] ^= np.uint64(1) << bit[flip]
    repeats = fps[rng.integers(0, uniform, size=n - uniform - near)]
    all_fps = np.concatenate([fps, copies, repeats])
    order = rng.permutation(n)
    return all_fps[order], np.arange(n, dtype=np.int64)


def write_parquet(path: str, fps: np.ndarray, ids: np.ndarray, files: int = 16) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(path, exist_ok=True)
    for i, part in enumerate(np.array_split(np.arange(len(fps)), files)):
        table = pa.table({"id": ids[part], "fingerprint": fps[part].view(np.int64)})
        pq.write_table(table, os.path.join(path, f"part-{i:03}.parquet"))


def single_process(fps: np.ndarray, ids: np.ndarray, k: int, work: str) -> dict:
    import simstore

    path = os.path.join(work, "store")
    t0 = time.perf_counter()
    with simstore.Store.create(path, max_distance=k, expected_size=len(fps), query_threads=1) as store:
        store.insert_many(fps, ids.view(np.uint64))
        store.wait_warm()
        t1 = time.perf_counter()
        # In slices, so that the answers of a 100M self-join need not all
        # be held at once.
        pairs = rows = 0
        for start in range(0, len(fps), QUERY_SLICE):
            m = store.query_many(fps[start : start + QUERY_SLICE], k)
            qid = ids[start + m.query.astype(np.int64)].view(np.uint64)
            pairs += int(np.count_nonzero(qid < m.id))
            rows += len(m.id)
        t2 = time.perf_counter()
    shutil.rmtree(path)
    return {"build_s": t1 - t0, "query_s": t2 - t1, "total_s": t2 - t0, "pairs": pairs, "rows": rows}


def shuffle_bytes(ui: str, app: str) -> int:
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/stages?status=complete") as r:
        stages = json.load(r)
    return sum(s.get("shuffleWriteBytes", 0) for s in stages)


def spark_run(
    data: str, k: int, executors: int, memory_mb: int, work: str, extras: bool = False
) -> dict:
    from pyspark.sql import SparkSession

    from simstore import spark as sss

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master(f"local-cluster[{executors},1,{memory_mb}]")
        .appName(f"simstore-bench-{executors}")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", "4099")
        .config("spark.local.dir", work)
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        df = session.read.parquet(data)
        out = os.path.join(work, "pairs")
        t0 = time.perf_counter()
        pairs = sss.near_duplicate_pairs(df, "fingerprint", "id", k)
        pairs.write.mode("overwrite").parquet(out)
        wall = time.perf_counter() - t0
        count = session.read.parquet(out).count()
        # The join's shuffle only (before the extras run).
        shuffled = shuffle_bytes(session.sparkContext.uiWebUrl, session.sparkContext.applicationId)
        found = {}
        if extras:
            # dedup of the same rows, and a tenth of them matched against all.
            session.sparkContext.setCheckpointDir(os.path.join(work, "checkpoints"))
            t0 = time.perf_counter()
            kept = sss.dedup(df, "fingerprint", "id", k)
            kept.write.mode("overwrite").parquet(out + "-dedup")
            found["dedup_s"] = time.perf_counter() - t0
            found["duplicates"] = session.read.parquet(out + "-dedup").where("duplicate_of is not null").count()
            batch = df.where("id % 10 = 0")
            t0 = time.perf_counter()
            sss.match_against(batch, df, k).write.format("noop").mode("overwrite").save()
            found["match_s"] = time.perf_counter() - t0
    finally:
        session.stop()
    shutil.rmtree(os.path.join(work, "pairs"), ignore_errors=True)
    for extra in ("pairs-dedup", "checkpoints"):
        shutil.rmtree(os.path.join(work, extra), ignore_errors=True)
    return {"executors": executors, "wall_s": wall, "pairs": count, "shuffle_bytes": shuffled, **found}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=10_000_000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--executors", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--executor-memory-mb", type=int, default=4096)
    ap.add_argument("--work", default=None, help="a directory for the data and Spark's files")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--extras",
        action="store_true",
        help="also time dedup and match_against (a tenth of the rows against all) on each cluster",
    )
    args = ap.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="simstore-spark-bench-")
    data = os.path.join(work, "data")
    fps, ids = dataset(args.size)
    write_parquet(data, fps, ids)
    single = single_process(fps, ids, args.k, work)
    del fps, ids
    runs = [
        spark_run(data, args.k, e, args.executor_memory_mb, work, args.extras) for e in args.executors
    ]

    n = args.size
    per_core_single = single["total_s"]
    print(f"N = {n:,} rows with ids, k = {args.k}, {os.cpu_count()} cores on the machine\n")
    print("| | wall | cores | rows/s per core | time x cores vs single process | pairs | shuffle |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| single process: insert_many + query_many (build {single['build_s']:.1f} s, "
        f"query {single['query_s']:.1f} s) | {single['total_s']:.1f} s | 1 | "
        f"{n / per_core_single:,.0f} | 1.00x | {single['pairs']:,} | - |"
    )
    for r in runs:
        per_core = r["wall_s"] * r["executors"]
        print(
            f"| Spark, {r['executors']} executor(s) of 1 core | {r['wall_s']:.1f} s | {r['executors']} | "
            f"{n / per_core:,.0f} | {per_core / per_core_single:.2f}x | {r['pairs']:,} | "
            f"{r['shuffle_bytes'] / 2**20:,.0f} MiB |"
        )
        if "dedup_s" in r:
            print(
                f"|   dedup: {r['dedup_s']:.1f} s ({r['duplicates']:,} rows marked); "
                f"match_against of a tenth: {r['match_s']:.1f} s | | | | | | |"
            )
        if r["pairs"] != single["pairs"]:
            print(f"MISMATCH: Spark found {r['pairs']} pairs, the single process {single['pairs']}")
            sys.exit(1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"size": n, "k": args.k, "single": single, "spark": runs}, f, indent=1)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
