"""The exceptions simstore raises: one class per kind of failure, all under
:class:`Error`.

Every failure of the Rust library (``simstore::Error``) arrives as one of
these; a call that raises changed nothing unless the class says otherwise
(:class:`PoisonedError`, :class:`BackgroundError`). Classes about bad
arguments also derive from :class:`ValueError` (or :class:`TypeError`),
and those about the file system from :class:`OSError`, so generic handlers
keep working.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "NotAStoreError",
    "AlreadyExistsError",
    "LockedError",
    "UnsupportedVersionError",
    "IncompatibleOptionsError",
    "DistanceTooLargeError",
    "PlanError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "CorruptError",
    "FileSystemError",
    "StorageError",
    "PoisonedError",
    "BackgroundError",
    "ClosedError",
]


class Error(Exception):
    """Base class of every exception simstore raises."""


class NotAStoreError(Error):
    """The directory exists but is not a simstore store (no ``SIMSTORE``
    marker). Nothing was written to it. Attribute ``path``."""


class AlreadyExistsError(Error):
    """``Store.create`` was given a directory that already holds files.
    Attribute ``path``."""


class LockedError(Error):
    """Another process, or another handle in this one, has the store open.
    Attribute ``path``."""


class UnsupportedVersionError(Error):
    """The store was written by a format version this build cannot read.
    Attributes ``what``, ``supported``, ``found``."""


class IncompatibleOptionsError(Error, ValueError):
    """Options given at open contradict those the store was created with.
    Attributes ``option``, ``stored``, ``requested``."""


class DistanceTooLargeError(Error, ValueError):
    """A query asked for a distance beyond the store's table plan.
    Attributes ``asked``, ``supported``."""


class PlanError(Error, ValueError):
    """No table plan fits the creation options."""


class InvalidArgumentError(Error, ValueError):
    """An argument is out of its documented range (a negative or oversize
    fingerprint, arrays of different lengths, an unknown durability...)."""


class InvalidTypeError(InvalidArgumentError, TypeError):
    """An argument has the wrong type (an array whose dtype is not
    ``uint64``, a string where an integer belongs...)."""


class CorruptError(Error):
    """Stored bytes fail their checks; the answer that needed them is not
    given. Attributes ``location``, ``reason``."""


class FileSystemError(Error, OSError):
    """A file-system operation outside RocksDB failed. Attribute ``path``."""


class StorageError(Error, OSError):
    """RocksDB reported an error (I/O failure, disk full...). Attribute
    ``context``."""


class PoisonedError(Error):
    """An earlier write failed and may or may not have reached the disk: the
    handle refuses writes until the store is reopened. Queries still work."""


class BackgroundError(Error):
    """Background work of the handle (a merge, the loading of tables into
    memory) failed; raised once, by the next write, ``compact``, ``flush``,
    ``sync`` or ``close``. Attribute ``task``; the underlying error is the
    ``__cause__``."""


class ClosedError(Error):
    """The store handle was closed (``close()``, or the end of its ``with``
    block)."""
