"""Shared fixtures and the brute-force oracle the tests check answers
against."""

from __future__ import annotations

import numpy as np
import pytest

_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def popcount(x: np.ndarray) -> np.ndarray:
    """Bits set in each uint64."""
    x = np.ascontiguousarray(x, dtype=np.uint64)
    return _POP8[x.view(np.uint8).reshape(-1, 8)].sum(axis=1, dtype=np.int64)


class Oracle:
    """What a store holds, as a set of (fingerprint, id) pairs (id None for
    a fingerprint stored without one), and the answers brute force gives."""

    def __init__(self) -> None:
        self.pairs: dict[int, set] = {}
        self._sorted = None

    def insert(self, fp: int, id_=None) -> None:
        self._sorted = None
        self.pairs.setdefault(int(fp), set()).add(None if id_ is None else int(id_))

    def delete(self, fp: int, id_=None) -> bool:
        self._sorted = None
        fp = int(fp)
        if fp not in self.pairs:
            return False
        if id_ is None:
            del self.pairs[fp]
            return True
        ids = self.pairs[fp]
        if int(id_) not in ids:
            return False
        ids.discard(int(id_))
        if not ids or ids == {None}:
            # The last id gone: the fingerprint goes with it.
            del self.pairs[fp]
        return True

    def ids(self, fp: int) -> list:
        return sorted(i for i in self.pairs.get(int(fp), ()) if i is not None)

    def fingerprints(self) -> np.ndarray:
        if self._sorted is None:
            self._sorted = np.array(sorted(self.pairs), dtype=np.uint64)
        return self._sorted

    def query(self, fp: int, k: int) -> list:
        """[(fingerprint, distance, ids)] by distance, then fingerprint."""
        fps = self.fingerprints()
        if len(fps) == 0:
            return []
        d = popcount(fps ^ np.uint64(fp))
        hit = np.nonzero(d <= k)[0]
        out = [(int(fps[i]), int(d[i]), self.ids(int(fps[i]))) for i in hit]
        return sorted(out, key=lambda m: (m[1], m[0]))

    def rows(self, queries: np.ndarray, k: int) -> list:
        """query_many's rows as tuples, in its order."""
        out = []
        for q, fp in enumerate(queries):
            for f, d, ids in self.query(int(fp), k):
                for i in ids or [2**64 - 1]:
                    out.append((q, f, d, i))
        return out


def brute_pairs(fps: np.ndarray, k: int) -> set:
    """Every pair of distinct fingerprints within k, as (a, b, distance)
    with a < b."""
    u = np.unique(np.asarray(fps, dtype=np.uint64))
    out = set()
    for i in range(len(u) - 1):
        d = popcount(u[i + 1 :] ^ u[i])
        for j in np.nonzero(d <= k)[0]:
            out.add((int(u[i]), int(u[i + 1 + j]), int(d[j])))
    return out


def random_fps(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)


def flip(rng: np.random.Generator, fps: np.ndarray, max_bits: int) -> np.ndarray:
    """Each fingerprint with 0..max_bits random bits flipped."""
    out = fps.copy()
    for i in range(len(out)):
        bits = rng.choice(64, size=int(rng.integers(0, max_bits + 1)), replace=False)
        for b in bits:
            out[i] ^= np.uint64(1) << np.uint64(int(b))
    return out


def clustered_fps(rng: np.random.Generator, n: int, centres: int = 50) -> np.ndarray:
    """Fingerprints around a few centres (near-duplicate families)."""
    base = random_fps(rng, centres)
    picks = base[rng.integers(0, centres, size=n)]
    return flip(rng, picks, 6)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261125)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "store"
