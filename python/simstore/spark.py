"""Exact near-duplicate joins on Apache Spark, with simstore as the kernel of
every task (Manku, Jain, Das Sarma, WWW 2007, §3.3).

Needs ``pyspark`` (``pip install 'simstore[spark]'``) on the driver, and
the ``simstore`` package importable by the executors' Python.

Fingerprint columns are Spark ``LongType`` holding the 64 bits in two's
complement (Spark has no unsigned 64-bit type: ``0xFFFF...`` is ``-1``) or
16-hex-digit strings; both are accepted everywhere, and results carry
fingerprints in the type the input had. Ids are ``LongType``. Rows whose
fingerprint (or id) is null take part in nothing.

How the self-join works: every distinct fingerprint is routed once per
table of the pigeonhole plan a store of the data's size would use, keyed
by its permuted prefix; a shuffle brings each key to one task, and the
task finds the pairs within ``k`` among its fingerprints with
:class:`simstore._simstore.Join`, reporting a pair only from the first
table whose prefix the two share. Every pair comes out exactly once, with
no global distinct. Repeated fingerprints (the empty page, carried by
100K documents) are collapsed within each input partition before the
shuffle, so they do not weigh on one task.

>>> from pyspark.sql import SparkSession                    # doctest: +SKIP
>>> from simstore import spark as sss                       # doctest: +SKIP
>>> spark = SparkSession.builder.getOrCreate()              # doctest: +SKIP
>>> df = spark.createDataFrame([(1, "0123456789abcdef"), (2, "0123456789abcdee")],
...                            "id long, fp string")        # doctest: +SKIP
>>> sss.near_duplicate_pairs(df, "fp", "id", k=3).collect()  # doctest: +SKIP
[Row(id_a=1, id_b=2, distance=1)]
"""

from __future__ import annotations

import math
import uuid
from typing import TYPE_CHECKING, Iterator, Optional

import numpy as np

from ._simstore import Fingerprinter, Join

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import Column, DataFrame

__all__ = [
    "fingerprint",
    "near_duplicate_fingerprints",
    "near_duplicate_pairs",
    "match_against",
    "dedup",
    "to_long",
    "to_hex",
]

#: Routed copies of fingerprints per shuffle partition, when the caller
#: does not choose the partition count.
ROWS_PER_PARTITION = 2_000_000

_TWO_63 = 1 << 63
_TWO_64 = 1 << 64


def _spark():
    try:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "simstore.spark needs pyspark: pip install 'simstore[spark]'"
        ) from e
    return F, T


def _kind(df: "DataFrame", col: str) -> str:
    """'long' or 'hex', from the column's Spark type; a TypeError otherwise."""
    _, T = _spark()
    if col not in df.columns:
        raise ValueError(f"no column {col!r}: the columns are {df.columns}")
    t = df.schema[col].dataType
    if isinstance(t, T.LongType):
        return "long"
    if isinstance(t, T.StringType):
        return "hex"
    raise TypeError(
        f"fingerprint column {col!r} is {t.simpleString()}: it must be bigint "
        "(the 64 bits in two's complement) or a string of 16 hex digits"
    )


def to_long(col: "Column | str") -> "Column":
    """A 16-hex-digit string column as a ``LongType`` fingerprint (two's
    complement). A value that is not exactly 16 hex digits fails the job
    with a message that names it; null stays null."""
    F, _ = _spark()
    c = F.col(col) if isinstance(col, str) else col
    u = F.conv(c, 16, 10).cast("decimal(20,0)")
    two63 = F.lit(str(_TWO_63)).cast("decimal(20,0)")
    two64 = F.lit(str(_TWO_64)).cast("decimal(20,0)")
    as_long = F.when(u >= two63, u - two64).otherwise(u).cast("long")
    bad = c.isNotNull() & ~c.rlike("^[0-9a-fA-F]{16}$")
    return F.when(
        bad, F.raise_error(F.concat(F.lit("not a 16-hex-digit fingerprint: "), c))
    ).otherwise(as_long)


def to_hex(col: "Column | str") -> "Column":
    """A ``LongType`` fingerprint column as 16 lower-case hex digits."""
    F, _ = _spark()
    c = F.col(col) if isinstance(col, str) else col
    return F.lpad(F.lower(F.hex(c)), 16, "0")


def _as_long(df: "DataFrame", col: str) -> "Column":
    F, _ = _spark()
    return F.col(col) if _kind(df, col) == "long" else to_long(col)


def _back(kind: str, col: str) -> "Column":
    F, _ = _spark()
    return (F.col(col) if kind == "long" else to_hex(col)).alias(col)


def _u64(series: "pd.Series") -> np.ndarray:
    return series.to_numpy(dtype=np.int64).view(np.uint64)


def _i64(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.uint64).view(np.int64)


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= 8:
        raise ValueError(f"k must be an int from 0 to 8, got {k!r}")
    return int(k)


# --- fingerprints -----------------------------------------------------------


def fingerprint(
    df: "DataFrame",
    text_col: str,
    html: bool = False,
    *,
    out_col: str = "fingerprint",
    volatility_col: Optional[str] = None,
    shingle: int = 3,
    char_shingle: Optional[int] = None,
    stop_words: bool = False,
) -> "DataFrame":
    """``df`` with a ``LongType`` fingerprint of ``text_col`` added as
    ``out_col``, computed in the executors by :class:`Fingerprinter`
    (the fingerprints ``simstore hash`` prints, as two's complement).
    A document without words gets null. With ``volatility_col``, also
    each document's volatility (64 bytes, ``BinaryType``: what
    probabilistic queries take)."""
    F, T = _spark()
    if text_col not in df.columns:
        raise ValueError(f"no column {text_col!r}: the columns are {df.columns}")
    # Fail on the driver, not in every task, when an option is bad.
    Fingerprinter(shingle, char_shingle, stop_words)
    import pandas as pd

    def fps(texts):
        fp = Fingerprinter(shingle, char_shingle, stop_words)
        values = fp.fingerprint_many(texts.fillna("").tolist(), html=html)
        out = pd.Series(values.view(np.int64), dtype="Int64")
        out[values == 0] = pd.NA
        return out

    # Spark reads the kind of pandas UDF from the annotations.
    fps.__annotations__ = {"texts": pd.Series, "return": pd.Series}
    out = df.withColumn(out_col, F.pandas_udf(fps, T.LongType())(F.col(text_col)))
    if volatility_col is None:
        return out

    def vols(texts):
        fp = Fingerprinter(shingle, char_shingle, stop_words)
        v = fp.volatility_many(texts.fillna("").tolist(), html=html)
        return pd.Series([row.tobytes() for row in v], dtype=object)

    vols.__annotations__ = {"texts": pd.Series, "return": pd.Series}
    return out.withColumn(
        volatility_col, F.pandas_udf(vols, T.BinaryType())(F.col(text_col))
    )


# --- the self-join ------------------------------------------------------------


def _plan(k: int, n: int, blocks: Optional[int]) -> Join:
    return Join(k, blocks=blocks) if blocks is not None else Join(k, expected_size=max(n, 2))


#: A key whose distinct fingerprints are estimated above this is split
#: into chunks of half as many, every two chunks compared by one task.
HOT_KEY_ROWS = 40_000

#: Fingerprints sampled on the driver to find hot keys.
SAMPLE_ROWS = 500_000

_MIX = np.uint64(0x9E37_79B9_7F4A_7C15)


def _chunk(fps: np.ndarray, chunks) -> np.ndarray:
    """A fingerprint's chunk of a split key: a hash of it, so that every
    copy of a fingerprint lands in the same chunk."""
    with np.errstate(over="ignore"):
        return ((fps * _MIX) >> np.uint64(40)) % np.asarray(chunks, dtype=np.uint64)


def _hot_keys(fps: "DataFrame", join: Join, n: int, hot_key_rows: int) -> dict:
    """{(table, key): chunks} for the keys a sample of the distinct
    fingerprints puts above ``hot_key_rows``."""
    if n == 0:
        return {}
    fraction = min(1.0, SAMPLE_ROWS / n)
    sample = fps.sample(fraction=fraction, seed=17) if fraction < 1.0 else fps
    got = sample.toPandas()
    distinct = np.unique(_u64(got["fp"])) if len(got) else np.zeros(0, dtype=np.uint64)
    hot = {}
    for t in range(join.tables):
        keys, counts = np.unique(join.keys(distinct, t), return_counts=True)
        above = counts / fraction > hot_key_rows
        for key, count in zip(keys[above], counts[above]):
            chunks = min(64, math.ceil(count / fraction / (hot_key_rows / 2)))
            hot[(t, int(key))] = chunks
    return hot


def _route(
    fps: "DataFrame",
    k: int,
    blocks: Optional[int],
    partitions: Optional[int],
    hot_key_rows: Optional[int] = None,
    with_ids: bool = False,
) -> "tuple[DataFrame, int, int, dict]":
    """The bigint column ``fp`` of ``fps`` (no nulls) routed to the join's
    tasks: rows ``(t, key, sub, fp)``, each input partition's distinct
    fingerprints once per table, partitioned by ``(t, key, sub)``; with
    ``with_ids``, rows ``(t, key, sub, fp, id)`` from the columns ``fp``
    and ``id``, every row once per table. ``sub``
    is 0 but for hot keys, whose fingerprints are split into chunks by a
    hash and sent to every task ``sub = 1 + c1 * chunks + c2`` (``c1 <=
    c2``) of their chunk. Also the plan's distance and blocks, and the hot
    keys."""
    import pandas as pd

    n = fps.count()
    join = _plan(k, n, blocks)
    k, blocks, tables = join.max_distance, join.blocks, join.tables
    if partitions is None:
        parallelism = fps.sparkSession.sparkContext.defaultParallelism
        partitions = max(2 * parallelism, math.ceil(n * tables / ROWS_PER_PARTITION))
    elif isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ValueError(f"partitions must be a positive int, got {partitions!r}")
    if hot_key_rows is None:
        hot_key_rows = HOT_KEY_ROWS
    elif isinstance(hot_key_rows, bool) or not isinstance(hot_key_rows, int) or hot_key_rows < 2:
        raise ValueError(f"hot_key_rows must be an int of at least 2, got {hot_key_rows!r}")
    hot = _hot_keys(fps.select("fp"), join, n, hot_key_rows)
    # Per table: the hot keys, sorted, and their chunk counts.
    hot_tables = {}
    for (t, key), chunks in sorted(hot.items()):
        hot_tables.setdefault(t, ([], []))
        hot_tables[t][0].append(key)
        hot_tables[t][1].append(chunks)
    hot_tables = {
        t: (np.array(keys, dtype=np.uint64), np.array(chunks, dtype=np.int64))
        for t, (keys, chunks) in hot_tables.items()
    }

    def frame(t: int, keys: np.ndarray, subs: np.ndarray, values: np.ndarray, ids) -> "pd.DataFrame":
        columns = {
            "t": np.full(len(values), t, dtype=np.int32),
            "key": keys.view(np.int64),
            "sub": subs.astype(np.int32),
            "fp": values.view(np.int64),
        }
        if ids is not None:
            columns["id"] = ids
        return pd.DataFrame(columns)

    def route(batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
        frames = list(batches)
        if not frames:
            return
        values = np.concatenate([_u64(b["fp"]) for b in frames])
        ids = None
        if with_ids:
            ids = np.concatenate([b["id"].to_numpy(dtype=np.int64) for b in frames])
        else:
            # The whole input partition, deduplicated: a fingerprint
            # repeated many times is routed once per table from each
            # partition.
            values = np.unique(values)
        j = Join(k, blocks=blocks)
        for t in range(tables):
            keys = j.keys(values, t)
            if t not in hot_tables:
                yield frame(t, keys, np.zeros(len(keys), dtype=np.int32), values, ids)
                continue
            hot_keys, hot_chunks = hot_tables[t]
            is_hot = np.isin(keys, hot_keys)
            cool = np.nonzero(~is_hot)[0]
            yield frame(
                t, keys[cool], np.zeros(len(cool), dtype=np.int32), values[cool],
                None if ids is None else ids[cool],
            )
            at = np.nonzero(is_hot)[0]
            if not len(at):
                continue
            chunks = hot_chunks[np.searchsorted(hot_keys, keys[at])]
            mine = _chunk(values[at], chunks.astype(np.uint64)).astype(np.int64)
            # A fingerprint of chunk c goes to the task of (c, c') for every
            # chunk c' of its key.
            for other in range(int(chunks.max())):
                ok = other < chunks
                c1 = np.minimum(mine, other)[ok]
                c2 = np.maximum(mine, other)[ok]
                sel = at[ok]
                yield frame(
                    t, keys[sel], 1 + c1 * chunks[ok] + c2, values[sel],
                    None if ids is None else ids[sel],
                )

    schema = "t int, key long, sub int, fp long" + (", id long" if with_ids else "")
    routed = fps.mapInPandas(route, schema)
    return routed.repartition(partitions, "t", "key", "sub"), k, blocks, hot


def _task_groups(fps: "DataFrame", k: int, hot_key_rows: Optional[int] = None) -> "list[int]":
    """How many fingerprints each group a task compares (a table's key, or
    a pair of chunks of a hot key) holds."""
    routed, _, _, _ = _route(fps, k, None, None, hot_key_rows)
    counts = routed.groupBy("t", "key", "sub").count().collect()
    return [r["count"] for r in counts]


def _units(batches: Iterator["pd.DataFrame"], k: int, blocks: int, hot: dict):
    """The groups a task compares (its input batches, the rows routed to
    it), with their pairs of distinct fingerprints: ``(table, rows, first,
    (a, b, distance))``, ``first`` telling whether the group is the one
    that reports pairs of rows sharing a fingerprint (table 0, or a hot
    key's chunk against itself)."""
    import pandas as pd

    frames = list(batches)
    if not frames:
        return
    rows = pd.concat(frames, ignore_index=True)
    j = Join(k, blocks=blocks)
    plain = rows[rows["sub"] == 0]
    for t, group in plain.groupby("t", sort=False):
        yield int(t), group, int(t) == 0, j.self_pairs(_u64(group["fp"]), int(t))
    split = rows[rows["sub"] != 0]
    for (t, key, sub), group in split.groupby(["t", "key", "sub"], sort=False):
        chunks = hot[(int(t), int(np.int64(key).view(np.uint64)))]
        c1, c2 = divmod(int(sub) - 1, chunks)
        values = _u64(group["fp"])
        mine = _chunk(values, chunks).astype(np.int64)
        if c1 == c2:
            pairs = j.self_pairs(values[mine == c1], int(t))
        else:
            x, y, d = j.cross_pairs(values[mine == c1], values[mine == c2], int(t))
            pairs = (np.minimum(x, y), np.maximum(x, y), d)
        yield int(t), group, int(t) == 0 and c1 == c2, pairs


def _pairs_long(
    fps: "DataFrame",
    k: int,
    blocks: Optional[int],
    partitions: Optional[int],
    hot_key_rows: Optional[int] = None,
) -> "DataFrame":
    """(a, b, distance) over the bigint column ``fp`` of ``fps`` (no nulls)."""
    import pandas as pd

    routed, k, blocks, hot = _route(fps, k, blocks, partitions, hot_key_rows)

    def task(batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
        for _, _, _, (a, b, d) in _units(batches, k, blocks, hot):
            if len(a):
                yield pd.DataFrame({"a": _i64(a), "b": _i64(b), "distance": d.astype(np.int32)})

    return routed.mapInPandas(task, "a long, b long, distance int")


def _pairs_ids(
    rows: "DataFrame",
    k: int,
    blocks: Optional[int],
    partitions: Optional[int],
    hot_key_rows: Optional[int] = None,
) -> "DataFrame":
    """(x, y, distance) for the pairs of rows of ``rows`` (columns ``fp``,
    ``id``, no nulls): each task expands its pairs of fingerprints into
    pairs of rows itself, so no join with the rows follows the shuffle."""
    import pandas as pd

    routed, k, blocks, hot = _route(rows, k, blocks, partitions, hot_key_rows, with_ids=True)

    def task(batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
        for _, group, first, (a, b, d) in _units(batches, k, blocks, hot):
            members = group[["fp", "id"]]
            if len(a):
                pairs = pd.DataFrame({"fp": _i64(a), "b": _i64(b), "distance": d.astype(np.int32)})
                pairs = pairs.merge(members, on="fp").rename(columns={"id": "x"})
                pairs = pairs.drop(columns="fp").rename(columns={"b": "fp"})
                pairs = pairs.merge(members, on="fp").rename(columns={"id": "y"})
                yield pairs[["x", "y", "distance"]]
            if first:
                repeated = members[members.duplicated("fp", keep=False)]
                if len(repeated):
                    same = repeated.merge(repeated, on="fp", suffixes=("_x", "_y"))
                    same = same[same["id_x"] < same["id_y"]]
                    yield pd.DataFrame(
                        {"x": same["id_x"], "y": same["id_y"], "distance": np.zeros(len(same), dtype=np.int32)}
                    )

    return routed.mapInPandas(task, "x long, y long, distance int")


def near_duplicate_fingerprints(
    df: "DataFrame",
    fp_col: str = "fingerprint",
    k: int = 3,
    *,
    blocks: Optional[int] = None,
    partitions: Optional[int] = None,
    hot_key_rows: Optional[int] = None,
) -> "DataFrame":
    """Every pair of distinct fingerprints of ``df[fp_col]`` within Hamming
    distance ``k``, exactly once: columns ``a``, ``b`` (fingerprints, in the
    input's type, ``a`` below ``b`` as unsigned 64-bit numbers) and
    ``distance``.

    ``blocks`` picks the plan (``C(blocks, k)`` tables; by default the plan
    a store of the data's size would use); ``partitions`` the shuffle's
    partition count (by default one per 2M routed fingerprints, at least
    twice the cluster's parallelism). A key that a sample of the input
    (500K fingerprints, on the driver) puts above ``hot_key_rows``
    distinct fingerprints (default 40,000) is split into chunks of half
    that, one task per two chunks, so that a prefix shared by very many
    fingerprints does not sink one task. Runs two jobs on the input before
    the join: a count and the sample."""
    F, _ = _spark()
    k = _check_k(k)
    kind = _kind(df, fp_col)
    fps = df.select(_as_long(df, fp_col).alias("fp")).where(F.col("fp").isNotNull())
    pairs = _pairs_long(fps, k, blocks, partitions, hot_key_rows)
    return pairs.select(_back(kind, "a"), _back(kind, "b"), "distance")


def near_duplicate_pairs(
    df: "DataFrame",
    fp_col: str = "fingerprint",
    id_col: str = "id",
    k: int = 3,
    *,
    blocks: Optional[int] = None,
    partitions: Optional[int] = None,
    hot_key_rows: Optional[int] = None,
) -> "DataFrame":
    """Every pair of rows of ``df`` whose fingerprints are within distance
    ``k``, exactly once, as ``(id_a, id_b, distance)`` with ``id_a < id_b``.

    Rows that share one fingerprint pair up among themselves at distance 0
    (``n`` rows of one fingerprint give ``n(n-1)/2`` pairs: use
    :func:`dedup` to group them instead). Two rows with the same id are
    never a pair. Every row is routed with its id (once per table), and
    each task turns its pairs of fingerprints into pairs of rows itself,
    so no join with the input follows. The options are those of
    :func:`near_duplicate_fingerprints`."""
    F, _ = _spark()
    k = _check_k(k)
    if id_col not in df.columns:
        raise ValueError(f"no column {id_col!r}: the columns are {df.columns}")
    rows = df.select(_as_long(df, fp_col).alias("fp"), F.col(id_col).cast("long").alias("id"))
    rows = rows.where(F.col("fp").isNotNull() & F.col("id").isNotNull())
    both = _pairs_ids(rows, k, blocks, partitions, hot_key_rows).where(F.col("x") != F.col("y"))
    return both.select(
        F.least("x", "y").alias("id_a"), F.greatest("x", "y").alias("id_b"), "distance"
    )


# --- batch mode ----------------------------------------------------------------

_INDEXES: dict = {}


def match_against(
    batch_df: "DataFrame",
    collection_df: "DataFrame",
    k: int = 3,
    *,
    batch_fp: str = "fingerprint",
    collection_fp: str = "fingerprint",
    batch_id: Optional[str] = None,
    collection_id: Optional[str] = None,
) -> "DataFrame":
    """Every (batch row, collection row) pair within distance ``k``: the
    batch mode of Manku et al. §3.3. The batch's distinct fingerprints are
    collected on the driver and broadcast; each Python worker of an
    executor (one per task it runs at once, reused across tasks) indexes
    them once (every table of the plan, in memory) and every collection
    partition is scanned once, with no shuffle of the collection.

    Columns: ``batch_fp``, ``collection_fp`` (in each input's type),
    ``distance``, and the ids when ``batch_id`` / ``collection_id`` are
    given (then one row per pair of rows; otherwise one per pair of a
    batch fingerprint and a collection row). The batch must fit in the
    driver's memory, and in every Python worker's (8 bytes a fingerprint
    per table of the plan, once per task slot of an executor)."""
    import pandas as pd

    F, _ = _spark()
    k = _check_k(k)
    bkind = _kind(batch_df, batch_fp)
    ckind = _kind(collection_df, collection_fp)
    batch = (
        batch_df.select(_as_long(batch_df, batch_fp).alias("fp"))
        .where(F.col("fp").isNotNull())
        .distinct()
        .toPandas()
    )
    distinct = np.unique(_u64(batch["fp"])) if len(batch) else np.zeros(0, dtype=np.uint64)
    join = Join(k, expected_size=max(len(distinct), 2))
    blocks = join.blocks
    sc = collection_df.sparkSession.sparkContext
    shared = sc.broadcast(distinct.tobytes())
    token = uuid.uuid4().hex

    cols = [_as_long(collection_df, collection_fp).alias("c_fp")]
    if collection_id is not None:
        cols.append(F.col(collection_id).cast("long").alias("c_id"))
    coll = collection_df.select(*cols).where(F.col("c_fp").isNotNull())
    if collection_id is not None:
        coll = coll.where(F.col("c_id").isNotNull())

    def scan(batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
        key = (token, k, blocks)
        index = _INDEXES.get(key)
        if index is None:
            _INDEXES.clear()
            fps = np.frombuffer(shared.value, dtype=np.uint64)
            index = Join(k, blocks=blocks).index(fps)
            _INDEXES[key] = index
        for b in batches:
            q, fp, d = index.query_many(_u64(b["c_fp"]))
            rows = q.astype(np.int64)
            out = {"b_fp": _i64(fp), "c_fp": b["c_fp"].to_numpy()[rows], "distance": d.astype(np.int32)}
            if collection_id is not None:
                out["c_id"] = b["c_id"].to_numpy()[rows]
            yield pd.DataFrame(out)

    schema = "b_fp long, c_fp long, distance int" + (", c_id long" if collection_id else "")
    found = coll.mapInPandas(scan, schema)
    if batch_id is not None:
        ids = batch_df.select(
            _as_long(batch_df, batch_fp).alias("b_fp"), F.col(batch_id).cast("long").alias("b_id")
        ).where(F.col("b_fp").isNotNull() & F.col("b_id").isNotNull())
        found = found.join(ids, "b_fp")
    out = [
        _back(bkind, "b_fp").alias(batch_fp if batch_fp != collection_fp else "batch_fp"),
        _back(ckind, "c_fp").alias(
            collection_fp if batch_fp != collection_fp else "collection_fp"
        ),
        F.col("distance"),
    ]
    if batch_id is not None:
        out.append(F.col("b_id").alias(batch_id if batch_id != collection_id else "batch_id"))
    if collection_id is not None:
        out.append(
            F.col("c_id").alias(collection_id if batch_id != collection_id else "collection_id")
        )
    return found.select(*out)


# --- dedup ---------------------------------------------------------------------


def _cut(df: "DataFrame") -> "DataFrame":
    """``df`` computed now, its lineage cut: a reliable checkpoint when the
    context has a checkpoint directory (survives the loss of executors),
    a local one otherwise. Without this, each round of label propagation
    would nest the plans of all rounds before it."""
    sc = df.sparkSession.sparkContext
    if sc._jsc.sc().getCheckpointDir().isDefined():
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


def dedup(
    df: "DataFrame",
    fp_col: str = "fingerprint",
    id_col: str = "id",
    k: int = 3,
    *,
    keep: str = "earliest",
    order_col: Optional[str] = None,
    out_col: str = "duplicate_of",
    blocks: Optional[int] = None,
    partitions: Optional[int] = None,
    hot_key_rows: Optional[int] = None,
    max_iterations: int = 100,
) -> "DataFrame":
    """``df`` with a column ``duplicate_of``: null for the row kept from
    each cluster, the kept row's id for the others.

    Clusters are the connected components of the graph whose nodes are the
    distinct fingerprints and whose edges join fingerprints within distance
    ``k`` (rows of one fingerprint are one node). The kept row is the one
    with the smallest ``order_col`` (default: the id), ties broken by the
    id (``keep="earliest"``), or the largest (``keep="latest"``).

    This differs from ``simstore dedup`` and :func:`simstore.dedup`, which
    decide documents one at a time in order and store only the new ones: a
    document is a duplicate there only if it is within ``k`` of an earlier
    *kept* document, so in a chain A–B–C (A and C farther than ``k``
    apart) the CLI keeps A and C, while here all three are one cluster and
    only A is kept. Components are found by min-label propagation with
    pointer jumping, a few Spark jobs per round; rounds grow with the log
    of the longest chain. Rows whose fingerprint or id is null get null."""
    F, _ = _spark()
    k = _check_k(k)
    if keep not in ("earliest", "latest"):
        raise ValueError(f"keep must be 'earliest' or 'latest', got {keep!r}")
    for c in [id_col] + ([order_col] if order_col else []):
        if c not in df.columns:
            raise ValueError(f"no column {c!r}: the columns are {df.columns}")
    if out_col in df.columns:
        raise ValueError(f"column {out_col!r} already exists")
    pick = F.min if keep == "earliest" else F.max
    better = F.least if keep == "earliest" else F.greatest
    order = order_col or id_col

    base = df.withColumn("__fp", _as_long(df, fp_col))
    rows = base.select(
        F.col("__fp").alias("fp"), F.col(order).alias("o"), F.col(id_col).cast("long").alias("i")
    ).where(F.col("fp").isNotNull() & F.col("i").isNotNull())
    # A node's rank: its best row, and the node itself (for pointer jumps).
    nodes = rows.groupBy("fp").agg(pick(F.struct("o", "i")).alias("r")).select(
        "fp", F.struct(F.col("r.o").alias("o"), F.col("r.i").alias("i"), F.col("fp").alias("f")).alias("l")
    )
    pairs = _pairs_long(rows.select("fp"), k, blocks, partitions, hot_key_rows)
    edges = pairs.select(F.col("a").alias("src"), F.col("b").alias("dst")).unionByName(
        pairs.select(F.col("b").alias("src"), F.col("a").alias("dst"))
    ).cache()
    linked = edges.select(F.col("src").alias("fp")).distinct()
    labels = _cut(nodes.join(linked, "fp"))
    for _ in range(max_iterations):
        around = (
            edges.join(labels.withColumnRenamed("fp", "dst").withColumnRenamed("l", "nl"), "dst")
            .groupBy("src")
            .agg(pick("nl").alias("nl"))
            .withColumnRenamed("src", "fp")
        )
        step = labels.join(around, "fp", "left").select(
            "fp", better("l", F.coalesce("nl", "l")).alias("l")
        )
        jumped = _cut(
            step.alias("x")
            .join(step.alias("y"), F.col("x.l.f") == F.col("y.fp"))
            .select(F.col("x.fp").alias("fp"), better("x.l", "y.l").alias("l"))
        )
        changed = (
            jumped.alias("n")
            .join(labels.alias("p"), "fp")
            .where(F.col("n.l") != F.col("p.l"))
            .count()
        )
        labels = jumped
        if changed == 0:
            break
    else:
        raise RuntimeError(f"dedup: components did not settle in {max_iterations} rounds")
    final = nodes.join(labels.withColumnRenamed("l", "c"), "fp", "left").select(
        F.col("fp").alias("__fp"), F.coalesce("c", "l").alias("__c")
    )
    out = base.join(final, "__fp", "left")
    kept_row = (
        (F.col(order) == F.col("__c.o"))
        & (F.col(id_col).cast("long") == F.col("__c.i"))
        & (F.col("__fp") == F.col("__c.f"))
    )
    result = out.withColumn(
        out_col,
        F.when(F.col("__c").isNull() | F.col(id_col).isNull() | kept_row, F.lit(None).cast("long"))
        .otherwise(F.col("__c.i")),
    ).drop("__fp", "__c")
    edges.unpersist()
    return result
