"""Type stubs of the native module (``simstore._simstore``); its names are
re-exported by ``simstore``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Literal, Optional, Sequence, Union, overload

import numpy as np
import numpy.typing as npt

from . import QueryMatches

__version__: str
#: The id ``Store.query_many`` reports for a fingerprint stored without
#: one (2**64 - 1); refused as an id.
NO_ID: int

#: A 64-bit unsigned fingerprint or id: an int in 0..2**64 (numpy integer
#: scalars included).
UInt64 = Union[int, np.unsignedinteger[Any], np.signedinteger[Any]]
#: Many of them: a one-dimensional buffer of uint64 (numpy array,
#: ``array.array('Q')``, a ctypes ``c_uint64`` array, memoryview), an
#: array-like numpy turns into one (a pandas Series, an Arrow array), or
#: any iterable of ints. Arrays of another dtype are refused
#: (``InvalidTypeError``), never converted.
UInt64s = Union[npt.NDArray[np.uint64], memoryview, Iterable[int]]
PathLike = Union[str, os.PathLike[str]]

class Match:
    """A stored fingerprint within the asked distance of a query."""

    @property
    def fingerprint(self) -> int:
        """The stored fingerprint."""
    @property
    def distance(self) -> int:
        """Its Hamming distance from the query."""
    @property
    def ids(self) -> list[int]:
        """Its document ids, increasing (empty when stored without one); the
        smallest ``max_ids`` when the query gave one."""
    @property
    def id_count(self) -> int:
        """How many ids it has: ``len(ids)`` unless the query listed fewer."""

class Store:
    """A simstore store: a directory of fingerprints with their document ids,
    answering Hamming-distance queries; a context manager that closes it.

    Every method may be called from several threads at once; long calls
    release the GIL. Failures raise subclasses of ``simstore.Error``.
    """

    @staticmethod
    def create(
        path: PathLike,
        max_distance: Optional[int] = None,
        expected_size: Optional[int] = None,
        tables: Optional[int] = None,
        durability: Literal["sync", "buffered"] = "sync",
        memory_budget: Optional[int] = None,
        query_threads: Optional[int] = None,
        merge_threshold: Optional[int] = None,
    ) -> Store:
        """Creates a store in ``path`` (absent or empty).

        ``max_distance`` (default 3), ``expected_size`` (default 10M) and
        ``tables`` shape the table plan and are stored; ``durability``
        ("sync": every acknowledged write is fsynced; "buffered": a killed
        process loses nothing, a power cut the writes acknowledged since the
        last fsync, which the first write at least a second after the
        previous one, ``sync()`` and ``close()`` perform),
        ``memory_budget`` (bytes of tables and id blocks held in memory;
        default: half of physical memory),
        ``query_threads`` and ``merge_threshold`` (pending fingerprints that
        start a background merge, default 65,536) apply to this handle.
        Raises ``AlreadyExistsError`` when ``path`` holds files.
        """
    @staticmethod
    def open(
        path: PathLike,
        max_distance: Optional[int] = None,
        expected_size: Optional[int] = None,
        tables: Optional[int] = None,
        durability: Literal["sync", "buffered"] = "sync",
        memory_budget: Optional[int] = None,
        query_threads: Optional[int] = None,
        merge_threshold: Optional[int] = None,
    ) -> Store:
        """Opens the store in ``path``; creation options, when given, must
        agree with the stored ones (``IncompatibleOptionsError``):
        ``max_distance`` and ``tables`` must match, ``expected_size`` must
        give the stored table plan (another size that gives the same plan
        is accepted). Raises ``NotAStoreError`` for a directory that is not
        a store and ``LockedError`` when the store is open elsewhere, or
        was open in the process this one was forked from when it forked."""
    @staticmethod
    def open_or_create(
        path: PathLike,
        max_distance: Optional[int] = None,
        expected_size: Optional[int] = None,
        tables: Optional[int] = None,
        durability: Literal["sync", "buffered"] = "sync",
        memory_budget: Optional[int] = None,
        query_threads: Optional[int] = None,
        merge_threshold: Optional[int] = None,
    ) -> Store:
        """``open``, or ``create`` when ``path`` is absent or empty."""
    @property
    def path(self) -> Path:
        """The store's directory."""
    @property
    def max_distance(self) -> int:
        """The largest distance queries may ask for."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called, or this process was forked from
        the one that opened the store (the handle is then unusable)."""
    def wait_warm(self) -> None:
        """Waits until the tables are held in memory: an open loads them in
        the background, and until then queries read what they need from
        disk. Returns at once when they do not fit the memory budget."""
    def insert(self, fingerprint: UInt64, id: Optional[UInt64] = None) -> None:
        """Stores ``fingerprint`` with document ``id`` (or without one);
        visible to queries on return, durable as the store's durability
        says."""
    def insert_many(self, fingerprints: UInt64s, ids: Optional[UInt64s] = None) -> None:
        """Stores ``fingerprints[i]`` with ``ids[i]`` (or without ids), in
        one atomic commit."""
    def delete(self, fingerprint: UInt64, id: Optional[UInt64] = None) -> bool:
        """Removes the pair, or with no ``id`` the fingerprint with all its
        ids; returns whether it was stored."""
    def delete_many(
        self, fingerprints: UInt64s, ids: Optional[UInt64s] = None
    ) -> npt.NDArray[np.bool_]:
        """Removes many pairs (or whole fingerprints) in one atomic commit;
        returns, per entry, whether it was stored."""
    def query(
        self, fingerprint: UInt64, k: Optional[int] = None, max_ids: Optional[int] = None
    ) -> list[Match]:
        """Every stored fingerprint within distance ``k`` (default: the
        store's maximum), by distance then fingerprint. With ``max_ids``,
        each match lists at most that many ids, its smallest (none with
        0), and ``id_count`` counts them all without the rest being read: a
        match on a fingerprint that 300,000 documents share costs a few
        ids, not 300,000."""
    def query_first(
        self, fingerprint: UInt64, k: Optional[int] = None, max_ids: Optional[int] = None
    ) -> Optional[Match]:
        """Some stored fingerprint within distance ``k``, the search stopping
        at the first found; ``None`` when there is none. ``max_ids`` as for
        ``query``."""
    @overload
    def query_many(
        self,
        fingerprints: UInt64s,
        k: Optional[int] = None,
        first: bool = False,
        volatility: Optional[Union[npt.NDArray[np.uint8], bytes]] = None,
        recall: float = 0.985,
        max_probes: Optional[int] = None,
        max_ids: Optional[int] = None,
        return_counts: Literal[False] = False,
    ) -> QueryMatches:
        """Queries a whole array at once, without a Python object per
        match: four numpy arrays, one row per (query, match, id). With
        ``first``, at most one matching fingerprint per query (the nearest
        when the array is large next to the store). With
        ``volatility`` (64 bytes per fingerprint, a ``(n, 64)`` uint8
        array), probabilistic queries as ``query_probabilistic``. With
        ``max_ids``, rows for at most that many ids a match, its smallest
        (with 0, one row a match whose id is ``NO_ID``: pair it with
        ``return_counts`` to count a match's documents without listing
        them). With ``return_counts``, a pair: the matches, and a
        uint64 array of how many ids each row's fingerprint has (0 for
        one stored without an id), as ``Match.id_count``. Arrays of 4,096
        fingerprints or more are answered on ``query_threads`` threads."""
    @overload
    def query_many(
        self,
        fingerprints: UInt64s,
        k: Optional[int] = None,
        first: bool = False,
        volatility: Optional[Union[npt.NDArray[np.uint8], bytes]] = None,
        recall: float = 0.985,
        max_probes: Optional[int] = None,
        max_ids: Optional[int] = None,
        *,
        return_counts: Literal[True],
    ) -> tuple[QueryMatches, npt.NDArray[np.uint64]]: ...
    def query_probabilistic(
        self,
        fingerprint: UInt64,
        volatility: Union[bytes, str],
        k: Optional[int] = None,
        recall: float = 0.985,
        max_probes: Optional[int] = None,
        first: bool = False,
        max_ids: Optional[int] = None,
    ) -> list[Match]:
        """Probabilistic query (PSM) on a one-table store (``tables=1``): the
        runs of the query's header and of its likeliest bit flips, until
        an expected ``recall`` under the flip model or ``max_probes`` headers; every
        answer is a true match, some may be missed. ``volatility``: 64 bytes
        (``Fingerprinter.volatility``) or their 128 hex digits. Stores of
        several tables answer exactly. ``max_ids`` as for ``query``."""
    def ids(self, fingerprint: UInt64) -> list[int]:
        """The ids stored with ``fingerprint``, increasing."""
    def export(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        """Every stored pair as ``(fingerprints, ids)``, one row per pair,
        increasing by fingerprint then id; a fingerprint stored without an
        id has one row with id ``NO_ID``. Writes wait while it runs. To
        rebuild into a store of other options: ``new.insert_many(f[i !=
        NO_ID], i[i != NO_ID])`` and ``new.insert_many(f[i == NO_ID])``."""
    def compact(self) -> dict[str, int]:
        """Merges everything pending into the largest level and drops what
        was deleted; returns ``merged``, ``removed``, ``blocks_replaced``,
        ``blocks_written``."""
    def stats(self) -> dict[str, Any]:
        """Counts and sizes, with the keys of ``simstore stats``."""
    def verify(self) -> dict[str, Any]:
        """Reads everything back and checks it: ``ok``, ``problems`` (a list
        of strings) and counts, as ``simstore verify``."""
    def sync(self) -> None:
        """Makes every acknowledged write durable now."""
    def flush(self) -> None:
        """Writes RocksDB's in-memory buffers to table files (a shorter log
        to replay at the next open)."""
    def close(self) -> None:
        """Waits for background work, syncs and releases the store; raises
        what failed. Closing twice does nothing; other calls on a closed
        store raise ``ClosedError``. In a child forked from the process that
        opened the store, this and every other call raise ``LockedError``
        (the parent's store is left open)."""
    def __enter__(self) -> Store: ...
    def __exit__(self, kind: Any, value: Any, traceback: Any) -> bool: ...
    def __len__(self) -> int:
        """The number of stored fingerprints."""

class Fingerprinter:
    """64-bit simhash of documents: word shingles (``shingle`` words, or
    ``char_shingle`` characters) weighted by term frequency, stop words
    optionally dropped; the fingerprints ``simstore hash`` prints."""

    def __init__(
        self, shingle: int = 3, char_shingle: Optional[int] = None, stop_words: bool = False
    ) -> None: ...
    @property
    def shingle(self) -> int: ...
    @property
    def char_shingle(self) -> Optional[int]: ...
    @property
    def stop_words(self) -> bool: ...
    def fingerprint(self, text: str) -> Optional[int]:
        """The fingerprint of ``text``; ``None`` when it has no words."""
    def fingerprint_html(self, html: str) -> Optional[int]:
        """The fingerprint of the visible text of ``html`` (as ``simstore
        hash --html``); ``None`` when it has no words."""
    def weights(self, text: str, html: bool = False) -> Optional[npt.NDArray[np.float64]]:
        """The 64 signed weight sums behind the bits (bit ``j`` is set when
        ``weights[j] > 0``); ``None`` when the text has no words."""
    def volatility(self, text: str, html: bool = False) -> Optional[bytes]:
        """Each bit's probability to differ in a near-duplicate, as 64 bytes
        (byte ``j``: ``round(-8·log2 p_j)``), what probabilistic queries
        take; ``None`` when the text has no words."""
    def volatility_many(
        self, texts: Sequence[str] | Iterable[str], html: bool = False
    ) -> npt.NDArray[np.uint8]:
        """``volatility`` of many documents, on all cores without the GIL: a
        ``(n, 64)`` uint8 array (what ``Store.query_many(volatility=...)``
        takes); a document without words gets every bit at probability ½."""
    def fingerprint_many(
        self, texts: Sequence[str] | Iterable[str], html: bool = False
    ) -> npt.NDArray[np.uint64]:
        """Fingerprints of many documents, on all cores without the GIL, in
        input order; a document without words gets 0."""

class DedupSession:
    """The native half of ``simstore.dedup`` (not a public API)."""

    def __init__(
        self,
        path: str,
        k: Optional[int],
        similarity: Optional[float],
        fingerprinter: Fingerprinter,
        html: bool,
        max_candidates: Optional[int] = None,
    ) -> None: ...
    @property
    def k(self) -> int: ...
    def decide(
        self, texts: list[str], first_seq: int
    ) -> list[Optional[tuple[int, Optional[tuple[int, int, int, Optional[float]]]]]]: ...
    def other_pairs(self, logged: int, logged_new: int) -> Optional[str]: ...
    def close(self) -> None: ...

#: Three arrays of one length: two of uint64 and one of uint32.
Columns = tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.uint32]]

class Join:
    """The tables of a near-duplicate join: how fingerprints are routed to
    tasks (one key per table) and the pairs a task finds among what it
    received, each pair found by the first table whose prefix the two
    share. ``Join(max_distance, expected_size)`` takes the plan a store of
    that size would use (defaults: 3 and 1,000,000); ``blocks`` picks the
    plan with that many blocks instead. The kernel of ``simstore.spark``."""

    def __init__(
        self,
        max_distance: Optional[int] = None,
        expected_size: Optional[int] = None,
        blocks: Optional[int] = None,
    ) -> None: ...
    @property
    def max_distance(self) -> int:
        """The largest distance a pair may have."""
    @property
    def blocks(self) -> int:
        """How many blocks the 64 bits are split into."""
    @property
    def tables(self) -> int:
        """How many tables (copies of every fingerprint) the join routes."""
    def prefix_bits(self, table: int) -> int:
        """The width in bits of table ``table``'s keys."""
    def keys(self, fps: UInt64s, table: int) -> npt.NDArray[np.uint64]:
        """The keys of ``fps`` in table ``table``: equal keys, same task."""
    def self_pairs(self, fps: UInt64s, table: int) -> Columns:
        """The pairs of distinct fingerprints of ``fps`` within the distance
        whose first shared table is ``table``: ``(a, b, distance)`` with
        ``a < b``, each pair once."""
    def cross_pairs(self, left: UInt64s, right: UInt64s, table: int) -> Columns:
        """The pairs ``(a from left, b from right)``, ``a != b``, within the
        distance whose first shared table is ``table``."""
    def index(self, fps: UInt64s) -> JoinIndex:
        """An in-memory index of ``fps`` (every table sorted) that answers
        queries exactly."""

class JoinIndex:
    """A batch of fingerprints in every table of a ``Join``, for matching
    many queries against it (``Join.index``)."""

    def query_many(self, queries: UInt64s) -> Columns:
        """Every indexed fingerprint within the distance of each query:
        ``(query, fingerprint, distance)``, ``query`` being the position of
        the query in ``queries``; each match once."""
    def __len__(self) -> int: ...

def log_decided_new(line: bytes) -> bool:
    """Whether a line of ``simstore.dedup``'s decision log (without its
    end) decided its document new."""

def log_name_hash(name: str, mask: int) -> int:
    """The hash of a document name in ``simstore.dedup``'s decision log
    index (SipHash of its UTF-8 bytes), masked by ``mask``."""

def scan_log(
    path: PathLike, start: int, seq: int, mask: int, limit: int
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], int, int]:
    """Reads the decision log at ``path`` from byte ``start`` (the line
    numbered ``seq``): the starts of up to ``limit`` lines in the layout the
    log is written in and their names' hashes, up to the first other line;
    where the next line begins; and how many of those lines decided their
    document new."""
