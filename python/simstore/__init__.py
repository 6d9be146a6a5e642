"""simstore: a persistent, embedded store for 64-bit simhash fingerprints.

For every new document it answers *is any stored fingerprint within
Hamming distance k of this one, and which documents carry it?*, from a
directory on local disk that survives restarts and crashes.

>>> import tempfile, numpy as np, simstore
>>> with simstore.Store.create(tempfile.mkdtemp() + "/s") as store:
...     store.insert_many(np.array([0x0123456789ABCDEF, 0xFEDCBA9876543210], dtype=np.uint64),
...                       np.array([1, 2], dtype=np.uint64))
...     [m.ids for m in store.query(0x0123456789ABCDEE)]
[[1]]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._dedup import Decision, dedup
from ._simstore import NO_ID, Fingerprinter, Join, JoinIndex, Match, Store, __version__
from .errors import (
    AlreadyExistsError,
    BackgroundError,
    ClosedError,
    CorruptError,
    DistanceTooLargeError,
    Error,
    FileSystemError,
    IncompatibleOptionsError,
    InvalidArgumentError,
    InvalidTypeError,
    LockedError,
    NotAStoreError,
    PlanError,
    PoisonedError,
    StorageError,
    UnsupportedVersionError,
)

__all__ = [
    "NO_ID",
    "Decision",
    "dedup",
    "Fingerprinter",
    "Join",
    "JoinIndex",
    "Match",
    "QueryMatches",
    "Store",
    "__version__",
    "AlreadyExistsError",
    "BackgroundError",
    "ClosedError",
    "CorruptError",
    "DistanceTooLargeError",
    "Error",
    "FileSystemError",
    "IncompatibleOptionsError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "LockedError",
    "NotAStoreError",
    "PlanError",
    "PoisonedError",
    "StorageError",
    "UnsupportedVersionError",
]


class QueryMatches(NamedTuple):
    """The answers of :meth:`Store.query_many` as four numpy arrays of one
    length, one row per (query, matching fingerprint, id).

    A fingerprint stored with several ids gives several rows; one stored
    without an id, or any asked with ``max_ids=0``, gives one row whose id
    is :data:`NO_ID`. Rows are grouped
    by query, in query order; within a query, matches come by distance,
    then fingerprint, then id (with ``first=True``, at most one fingerprint
    per query).
    """

    #: int64: the index of the query in the input array.
    query: np.ndarray
    #: uint64: the stored fingerprint.
    fingerprint: np.ndarray
    #: int32: its Hamming distance from the query.
    distance: np.ndarray
    #: uint64: one of its document ids (or :data:`NO_ID`).
    id: np.ndarray
