"""Bad input raises the documented exception and changes nothing."""

from __future__ import annotations

import array
import inspect

import numpy as np
import pytest

import simstore
from simstore import errors


def test_every_class_is_under_error():
    for name in errors.__all__:
        cls = getattr(simstore, name)
        assert issubclass(cls, simstore.Error)
        assert cls.__doc__
    assert issubclass(simstore.InvalidArgumentError, ValueError)
    assert issubclass(simstore.InvalidTypeError, TypeError)
    assert issubclass(simstore.StorageError, OSError)


def snapshot(store: simstore.Store):
    s = store.stats()
    return s["fingerprints"], s["ids"], s["pending"], s["tombstones"]


@pytest.fixture
def store(path):
    with simstore.Store.create(path, max_distance=3) as s:
        s.insert_many(np.array([1, 2, 3], dtype=np.uint64), np.array([10, 20, 30], dtype=np.uint64))
        yield s


BAD_FINGERPRINTS = [
    (-1, simstore.InvalidArgumentError),
    (2**64, simstore.InvalidArgumentError),
    (2**70, simstore.InvalidArgumentError),
    (1.5, simstore.InvalidTypeError),
    ("0123456789abcdef", simstore.InvalidTypeError),
    (None, simstore.InvalidTypeError),
    (True, simstore.InvalidTypeError),
]


@pytest.mark.parametrize("value,error", BAD_FINGERPRINTS)
def test_bad_single_values(store, value, error):
    before = snapshot(store)
    with pytest.raises(error):
        store.insert(value, 5)
    with pytest.raises(error):
        store.insert(5, value if value is not None else "x")
    with pytest.raises(error):
        store.delete(value)
    with pytest.raises(error):
        store.query(value)
    with pytest.raises(error):
        store.query_first(value)
    assert snapshot(store) == before


BAD_ARRAYS = [
    (np.array([1, 2], dtype=np.int64), simstore.InvalidTypeError),
    (np.array([1, 2], dtype=np.uint32), simstore.InvalidTypeError),
    (np.array([1.0, 2.0]), simstore.InvalidTypeError),
    (np.array([[1, 2]], dtype=np.uint64), simstore.InvalidArgumentError),
    (array.array("q", [1, 2]), simstore.InvalidTypeError),
    ([1, -2], simstore.InvalidArgumentError),
    ([1, 2**64], simstore.InvalidArgumentError),
    ([1, "2"], simstore.InvalidTypeError),
    ("12", simstore.InvalidTypeError),
    (7, simstore.InvalidTypeError),
]


@pytest.mark.parametrize("value,error", BAD_ARRAYS)
def test_bad_arrays(store, value, error):
    before = snapshot(store)
    with pytest.raises(error):
        store.insert_many(value, [1, 2])
    with pytest.raises(error):
        store.insert_many([7, 8], value)
    with pytest.raises(error):
        store.delete_many(value)
    with pytest.raises(error):
        store.query_many(value)
    assert snapshot(store) == before


def test_mismatched_lengths_and_reserved_id(store):
    before = snapshot(store)
    with pytest.raises(simstore.InvalidArgumentError, match="one length"):
        store.insert_many(np.array([4, 5], dtype=np.uint64), np.array([1], dtype=np.uint64))
    with pytest.raises(simstore.InvalidArgumentError, match="reserved"):
        store.insert(4, simstore.NO_ID)
    with pytest.raises(simstore.InvalidArgumentError, match="reserved"):
        store.insert_many([4, 5], [1, simstore.NO_ID])
    assert snapshot(store) == before


def test_distance_beyond_the_store(store):
    with pytest.raises(simstore.DistanceTooLargeError) as e:
        store.query(1, k=4)
    assert (e.value.asked, e.value.supported) == (4, 3)
    with pytest.raises(simstore.DistanceTooLargeError):
        store.query_many(np.array([1], dtype=np.uint64), k=4)
    with pytest.raises(simstore.InvalidArgumentError):
        store.query(1, k=-1)
    with pytest.raises(simstore.InvalidArgumentError):
        store.query(1, k=65)


def test_opening_what_is_not_a_store(tmp_path):
    (tmp_path / "file.txt").write_text("hello")
    with pytest.raises(simstore.NotAStoreError) as e:
        simstore.Store.open(tmp_path)
    assert e.value.path == str(tmp_path)
    with pytest.raises(simstore.AlreadyExistsError):
        simstore.Store.create(tmp_path)
    with pytest.raises(simstore.NotAStoreError):
        simstore.Store.open_or_create(tmp_path)
    # A file where the store would go is there already.
    with pytest.raises(simstore.AlreadyExistsError):
        simstore.Store.create(tmp_path / "file.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]
    assert (tmp_path / "file.txt").read_text() == "hello"


def test_second_open_is_refused(store, path):
    with pytest.raises(simstore.LockedError):
        simstore.Store.open(path)
    with pytest.raises(simstore.LockedError):
        simstore.Store.open_or_create(path)
    assert store.ids(1) == [10]


def test_options_checked(path, tmp_path):
    with pytest.raises(simstore.InvalidArgumentError, match="durability"):
        simstore.Store.create(path, durability="fast")
    with pytest.raises(simstore.InvalidArgumentError):
        simstore.Store.create(path, max_distance=-1)
    with pytest.raises(simstore.PlanError):
        simstore.Store.create(path, max_distance=40)
    assert not path.exists() or not any(path.iterdir())
    simstore.Store.create(path, max_distance=2).close()
    with pytest.raises(simstore.IncompatibleOptionsError) as e:
        simstore.Store.open(path, max_distance=3)
    assert e.value.option == "max_distance"
    with simstore.Store.open(path) as s:
        assert s.max_distance == 2


def test_closed_store(path):
    store = simstore.Store.create(path)
    store.insert(1, 2)
    store.close()
    store.close()
    assert store.closed
    for call in (lambda: store.insert(1, 3), lambda: store.query(1), lambda: store.stats(), lambda: len(store)):
        with pytest.raises(simstore.ClosedError):
            call()
    with pytest.raises(simstore.ClosedError):
        with store:
            pass
    with simstore.Store.open(path) as again:
        assert again.ids(1) == [2]


def test_with_block_closes_even_on_error(path):
    with pytest.raises(RuntimeError):
        with simstore.Store.create(path) as store:
            store.insert(9, 1)
            raise RuntimeError("boom")
    assert store.closed
    with simstore.Store.open(path) as store:
        assert store.ids(9) == [1]


def test_fingerprinter_arguments():
    with pytest.raises(simstore.InvalidArgumentError):
        simstore.Fingerprinter(shingle=0)
    with pytest.raises(simstore.InvalidArgumentError):
        simstore.Fingerprinter(char_shingle=-1)
    f = simstore.Fingerprinter()
    with pytest.raises(simstore.InvalidTypeError):
        f.fingerprint_many("one string")
    with pytest.raises(simstore.InvalidTypeError):
        f.fingerprint_many(["ok", 3])
    with pytest.raises(TypeError):
        f.fingerprint(3)


def test_public_names_are_documented():
    for name in simstore.__all__:
        obj = getattr(simstore, name)
        if inspect.isclass(obj) or callable(obj):
            assert obj.__doc__, name
    for cls in (simstore.Store, simstore.Fingerprinter, simstore.Match, simstore.Join, simstore.JoinIndex):
        for name, member in vars(cls).items():
            if not name.startswith("_"):
                assert getattr(member, "__doc__", None), f"{cls.__name__}.{name}"


def test_array_likes_through_numpy(store):
    import pandas as pd
    import pyarrow as pa

    got = store.query_many(pd.Series([1, 2], dtype="uint64"), 0)
    assert got.id.tolist() == [10, 20]
    got = store.query_many(pa.array([3], type=pa.uint64()), 0)
    assert got.id.tolist() == [30]
    with pytest.raises(simstore.InvalidTypeError, match="int64"):
        store.query_many(pd.Series([1, 2]), 0)
    # Big-endian arrays are read by value, not by their bytes.
    got = store.query_many(np.array([1, 2, 3], dtype=">u8"), 0)
    assert got.id.tolist() == [10, 20, 30]
    store.insert_many(np.array([2**40 + 1], dtype=">u8"), np.array([99], dtype=">u8"))
    assert store.ids(2**40 + 1) == [99]
    store.delete(2**40 + 1)
    # ctypes arrays name their byte order in their format (`<Q`).
    import ctypes

    got = store.query_many((ctypes.c_uint64 * 3)(1, 2, 3), 0)
    assert got.id.tolist() == [10, 20, 30]
    big = ctypes.c_uint64.__ctype_be__
    store.insert_many((big * 1)(2**40 + 2), (ctypes.c_uint64 * 1)(98))
    assert store.ids(2**40 + 2) == [98]
    store.delete(2**40 + 2)
    # Signed ctypes arrays stay refused.
    with pytest.raises(simstore.InvalidTypeError, match="uint64"):
        store.query_many((ctypes.c_int64 * 2)(1, 2), 0)


def test_messages_name_what_is_wrong(store):
    before = snapshot(store)
    with pytest.raises(simstore.InvalidArgumentError, match="one-dimensional, got 0"):
        store.query_many(np.array(1, dtype=np.uint64))
    with pytest.raises(simstore.InvalidArgumentError) as e:
        store.query(1, k=-1)
    assert "Spark" not in str(e.value)
    with pytest.raises(simstore.InvalidArgumentError, match="Spark"):
        store.query(-1)
    # A budget is checked whether or not a volatility uses it.
    with pytest.raises(simstore.InvalidArgumentError, match="recall"):
        store.query_many([1], recall=5.0)
    with pytest.raises(simstore.InvalidArgumentError, match="max_probes"):
        store.query_many([1], max_probes=0)
    f = simstore.Fingerprinter()
    with pytest.raises(simstore.InvalidArgumentError, match="surrogate"):
        f.fingerprint_many(["fine", "a \ud800 b"])
    with pytest.raises(simstore.InvalidTypeError, match="bytes"):
        f.fingerprint_many(b"abc")
    assert snapshot(store) == before


def test_a_forked_child_cannot_use_the_parents_handle(store, path):
    """The child gets `LockedError` from every use (a write crossing the
    merge threshold used to wait forever there for the parent's merge
    thread) and exits without closing the parent's store."""
    import os
    import time

    store.insert_many(np.arange(100, 5100, dtype=np.uint64), np.arange(5000, dtype=np.uint64))
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for call in (
                lambda: store.insert_many(np.arange(10**6, 10**6 + 100, dtype=np.uint64), np.arange(100, dtype=np.uint64)),
                lambda: store.insert(7, 7),
                lambda: store.query(1),
                store.close,
            ):
                try:
                    call()
                    code |= 1
                except simstore.LockedError as e:
                    code |= 0 if e.path == str(path) and "forked" in str(e) else 2
            code |= 0 if store.closed else 4
            del call
        except BaseException:
            code = 8
        finally:
            os._exit(code)
    deadline = time.time() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent's handle is untouched and nothing the child tried landed.
    assert store.ids(7) == [] and store.ids(1) == [10]
    store.insert(8, 80)
    assert store.ids(8) == [80]
    assert len(store) == 5003 + 1
