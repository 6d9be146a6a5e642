"""``simstore.dedup``: documents in, "new" or "near-duplicate of X" out,
with the store as durable state: the decisions of ``simstore dedup``.

The store directory and its decision log (``dedup.log``) are the command
line's: either can continue what the other began, and a rerun over the
same documents gives, for every document already decided, the decision it
got before.
"""

from __future__ import annotations

import json
import os
import warnings
from array import array
from itertools import islice
from typing import Any, Iterable, Iterator, NamedTuple, Optional, Tuple, Union

from ._simstore import DedupSession, Fingerprinter, log_decided_new, log_name_hash, scan_log

__all__ = ["Decision", "dedup"]

#: Name of the decision log inside the store directory.
LOG_NAME = "dedup.log"

#: The mask of the hashes of document names in the decision log's index
#: (tests make every name share one with 0).
_HASH_MASK = 2**64 - 1

#: Lines of the decision log read natively at a time.
_SCAN_LINES = 1 << 18


def _name_hash(name: str) -> int:
    """The hash of a document name in the decision log's index."""
    return log_name_hash(name, _HASH_MASK)


class Decision(NamedTuple):
    """What became of one document."""

    #: The document's id, as given.
    id: Any
    #: Its fingerprint; ``None`` for a document without words, which is
    #: neither stored nor logged.
    fingerprint: Optional[int]
    #: The id of the earlier document it is a near-duplicate of (``None``
    #: when it is new), as given. An earlier document decided by another
    #: run is named as the log recorded it (``str(id)``); so is one from an
    #: earlier chunk of this run when some id of the run is not an ``int``.
    duplicate_of: Any = None
    #: The Hamming distance to that document's fingerprint.
    distance: Optional[int] = None
    #: The estimated Jaccard similarity to it (``similarity`` runs only).
    similarity: Optional[float] = None

    @property
    def is_duplicate(self) -> bool:
        """Whether the document is a near-duplicate of an earlier one."""
        return self.duplicate_of is not None


class _Log:
    """The decision log: one JSON line per decided document, by sequence
    number, ``{"seq": n, "line": <the decision as simstore dedup prints it>}``.
    A torn last line (a crash while appending) is dropped.

    Held as where each line starts and the sequence number of each name by
    its hash (a name whose hash an earlier one has is kept whole); a line is
    read back from the file when a rerun gives its decision again or a later
    document names its document, so a log of millions of decisions costs a
    few bytes a decision in memory."""

    def __init__(self, directory: Union[str, os.PathLike]) -> None:
        self.path = os.path.join(os.fspath(directory), LOG_NAME)
        self.offsets = array("Q")
        self.end = 0
        self.seqs: dict = {}
        self.clashes: dict = {}
        self.names: dict = {}
        #: Lines whose document was decided new (and so stored).
        self.new = 0
        if not os.path.exists(self.path):
            open(self.path, "ab").close()
        self.reader = open(self.path, "rb", buffering=0)  # appended to while open
        with open(self.path, "rb") as f:
            while True:
                # The lines in the layout the log is written in, natively,
                # a slice at a time; then one other line (a name with
                # escapes), parsed here.
                starts, hashes, self.end, new = scan_log(
                    self.path, self.end, len(self.offsets), _HASH_MASK, _SCAN_LINES
                )
                self.new += new
                self._index(starts, hashes)
                if len(starts) == _SCAN_LINES:
                    continue
                f.seek(self.end)
                raw = f.readline()
                entry = _parse(raw) if raw.endswith(b"\n") else None
                if entry is None or entry[0] != len(self.offsets):
                    break
                self.offsets.append(self.end)
                self.end += len(raw)
                self.new += _decided_new(raw)
                self._remember(entry[1], entry[0])
        if os.path.getsize(self.path) != self.end:
            with open(self.path, "r+b") as f:
                f.truncate(self.end)
        self.file = open(self.path, "ab")

    def __len__(self) -> int:
        return len(self.offsets)

    def entry(self, seq: int) -> Tuple[str, str]:
        """The name and decision line logged as ``seq``, read back."""
        at = self.offsets[seq]
        end = self.offsets[seq + 1] if seq + 1 < len(self.offsets) else self.end
        self.reader.seek(at)
        entry = _parse(self.reader.read(end - at))
        if entry is None:
            raise RuntimeError(f"{LOG_NAME}: the line of document {seq} changed since it was read")
        return entry[1], entry[2]

    def name(self, seq: int) -> str:
        """The name logged as ``seq`` (those read back are kept, a few)."""
        if seq not in self.names:
            if len(self.names) >= 1 << 16:
                self.names.clear()
            self.names[seq] = self.entry(seq)[0]
        return self.names[seq]

    def logged(self, name: str) -> Optional[Tuple[int, str]]:
        """The sequence number and decision line of the document named
        ``name``, if logged: one read of its line, which also confirms the
        name."""
        seq = self.clashes.get(name)
        if seq is None:
            seq = self.seqs.get(_name_hash(name))
            if seq is None:
                return None
        logged, line = self.entry(seq)
        return (seq, line) if logged == name else None

    def _index(self, starts, hashes) -> None:
        """Takes in the lines starting at ``starts``, numbered on from the
        last, whose names have ``hashes``: a name whose hash an earlier one
        has is read back to tell a clash from a repeat."""
        first = len(self.offsets)
        self.offsets.frombytes(starts.tobytes())
        fresh = dict(zip(hashes.tolist(), range(first, first + len(hashes))))
        if len(fresh) == len(hashes) and self.seqs.keys().isdisjoint(fresh):
            if self.seqs:
                self.seqs.update(fresh)
            else:
                self.seqs = fresh
            return
        for seq in range(first, len(self.offsets)):
            self._remember(self.entry(seq)[0], seq)

    def _remember(self, name: str, seq: int) -> None:
        other = self.seqs.get(_name_hash(name))
        if other is not None and self.entry(other)[0] != name:
            self.clashes[name] = seq
        else:
            self.seqs[_name_hash(name)] = seq

    def append(self, entries: list) -> None:
        first = len(self.offsets)
        out = [
            json.dumps({"seq": first + i, "line": line}, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            for i, (_, line) in enumerate(entries)
        ]
        if not out:
            return
        self.file.write(b"".join(out))
        self.file.flush()
        os.fsync(self.file.fileno())
        for i, ((name, _), raw) in enumerate(zip(entries, out)):
            self.offsets.append(self.end)
            self.end += len(raw)
            self.new += _decided_new(raw)
            self._remember(name, first + i)

    def close(self) -> None:
        self.file.close()
        self.reader.close()


_DECODER = json.JSONDecoder()


def _decided_new(raw: bytes) -> bool:
    """Whether log line ``raw`` decided its document new."""
    return log_decided_new(raw.rstrip(b"\n"))


def _parse(raw: bytes) -> Optional[Tuple[int, str, str]]:
    """``(seq, name, line)`` of one log line, or ``None`` when it is not one:
    the layout the log is written in read directly (the decision line's id
    only, not all of it: a log of millions of lines is read at every start),
    any other by JSON values."""
    if raw.startswith(b'{"seq":'):
        try:
            comma = raw.index(b',"line":', 7)
            digits = raw[7:comma]
            line = json.loads(raw[comma + 8 : raw.rindex(b"}")])
            if digits.isdigit() and isinstance(line, str) and line.startswith('{"id":'):
                at = 6
                while line[at : at + 1] == " ":
                    at += 1
                name, _ = _DECODER.raw_decode(line, at)
                if isinstance(name, str):
                    return int(digits), name, line
        except ValueError:
            pass
    try:
        entry = json.loads(raw)
        line = entry["line"]
        name = json.loads(line)["id"]
        seq = entry["seq"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(name, str) or not isinstance(line, str) or not isinstance(seq, int):
        return None
    return seq, name, line


def _line(name: str, fingerprint: int, earlier: Optional[Tuple[str, int, int, Optional[float]]]) -> str:
    """A decision as ``simstore dedup`` prints it."""
    dump = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    if earlier is None:
        of = "null"
    else:
        of_name, of_fp, distance, similarity = earlier
        sim = "" if similarity is None else f',"similarity":{similarity:.3f}'
        of = f'{{"id":{dump(of_name)},"fingerprint":"{of_fp:016x}","distance":{distance}{sim}}}'
    return f'{{"id":{dump(name)},"fingerprint":"{fingerprint:016x}","duplicate_of":{of}}}'


def _from_line(doc_id: Any, line: str) -> Decision:
    d = json.loads(line)
    of = d["duplicate_of"]
    fp = int(d["fingerprint"], 16)
    if of is None:
        return Decision(doc_id, fp)
    return Decision(doc_id, fp, of["id"], of["distance"], of.get("similarity"))


def dedup(
    documents: Iterable[Tuple[Any, str]],
    path: Union[str, os.PathLike],
    *,
    k: Optional[int] = None,
    similarity: Optional[float] = None,
    html: bool = False,
    fingerprinter: Optional[Fingerprinter] = None,
    chunk: int = 256,
    max_candidates: Optional[int] = None,
) -> Iterator[Decision]:
    """Decides, in order, whether each ``(id, text)`` document is new or a
    near-duplicate of an earlier one, storing the new ones in the store at
    ``path`` (created when absent or empty); yields a :class:`Decision` per
    document, in input order.

    The decisions are those of ``simstore dedup DIR`` over the same
    documents: the nearest earlier document within distance ``k``
    (default: the store's maximum, 3 for a new store), the earliest among
    equals; with ``similarity`` (a Jaccard threshold in 0..1), candidates
    are re-checked with similarity sketches and the most similar wins (a
    new store then keeps sketches, with the distance the threshold needs);
    at most ``max_candidates`` candidates are re-checked a document
    (default 1,000, as ``dedup --max-candidates``), the nearest, then the
    earliest, first, so that pages sharing a template cost the same however
    many are stored.
    ``html`` reads documents as HTML (their visible text). Documents are
    fingerprinted ``chunk`` at a time on all cores, and each chunk's new
    documents are committed, then logged, before its decisions are
    yielded. Ids are recorded in the log as ``str(id)``; a document whose
    id the log already holds gets its recorded decision again. Once the
    documents are exhausted, a ``RuntimeWarning`` says so when the store
    holds pairs no logged decision stored (written by ``Store.insert`` or
    ``simstore add``): their ids are read as decision numbers.

    The store stays open (and locked) until the generator is exhausted or
    closed; use it in a ``for`` loop, or close it with ``.close()``.
    """
    if chunk < 1:
        from .errors import InvalidArgumentError

        raise InvalidArgumentError("chunk must be at least 1")
    session = DedupSession(
        os.fspath(path), k, similarity, fingerprinter or Fingerprinter(), html, max_candidates
    )
    try:
        log = _Log(path)
    except BaseException:
        session.close()
        raise
    try:
        docs = iter(documents)
        run = _Run(len(log))
        while True:
            batch = list(islice(docs, chunk))
            if not batch:
                break
            for part in _without_repeats(batch):
                yield from _decide(session, log, part, run)
        _warn_of_other_pairs(session, log, path)
    finally:
        log.close()
        session.close()


def _warn_of_other_pairs(session: DedupSession, log: _Log, path: Union[str, os.PathLike]) -> None:
    """Warns, as ``simstore dedup`` does, when the store holds more pairs
    than the logged decisions stored: pairs written by something else
    (``Store.insert``, ``simstore add``), whose ids are not decisions. Checked
    once every chunk is logged (a rerun after a kill starts with its last
    chunk stored and not yet logged)."""
    warning = session.other_pairs(len(log), log.new)
    if warning is not None:
        warnings.warn(f"{os.fspath(path)} {warning}", RuntimeWarning, stacklevel=3)


class _Run:
    """What one ``dedup`` call has logged: from which sequence number on,
    and whether every id it logged is an ``int`` (so that a name it logged
    reads back as its id)."""

    def __init__(self, start: int):
        self.start = start
        self.ints = True

    def id_of(self, seq: int, name: str) -> Any:
        """The id of the document logged at ``seq`` under ``name``."""
        return int(name) if self.ints and seq >= self.start else name


def _without_repeats(batch: list) -> Iterator[list]:
    """``batch`` cut, in order, into parts in which no name repeats. A
    repeated name is decided after the part holding its first occurrence
    is logged: by that occurrence's logged decision, or on its own text
    when that one had no words and was not logged, as ``simstore dedup``
    decides one document at a time."""
    part: list = []
    names: set = set()
    for item in batch:
        try:
            name = str(item[0])
        except (TypeError, IndexError, KeyError):
            name = None  # not a pair: `_decide` says so, in its turn
        if name is not None and name in names:
            yield part
            part, names = [], set()
        if name is not None:
            names.add(name)
        part.append(item)
    if part:
        yield part


def _decide(session: DedupSession, log: _Log, batch: list, run: _Run) -> Iterator[Decision]:
    from .errors import InvalidTypeError

    # Per document: its recorded decision, or its place among the texts
    # decided now (no name repeats within `batch`: see `_without_repeats`).
    plan: list = []
    names: list = []
    ids: list = []
    texts: list = []
    for item in batch:
        try:
            doc_id, text = item
        except (TypeError, ValueError):
            raise InvalidTypeError(f"documents must be (id, text) pairs, not {item!r:.80}") from None
        if not isinstance(text, str):
            raise InvalidTypeError(f"the text of document {doc_id!r} must be a str, not {type(text).__name__}")
        name = str(doc_id)
        logged = log.logged(name)
        if logged is not None:
            plan.append(("logged", doc_id, logged[1]))
        else:
            plan.append(("new", doc_id, len(names)))
            run.ints = run.ints and type(doc_id) is int
            names.append(name)
            ids.append(doc_id)
            texts.append(text)
    first_seq = len(log)
    decided = session.decide(texts, first_seq)
    # Documents with words are numbered in order; the others are skipped.
    seq_of: list = []
    seq = first_seq
    for d in decided:
        seq_of.append(seq if d is not None else None)
        seq += d is not None
    by_seq = {s: i for i, s in enumerate(seq_of) if s is not None}
    entries = []
    decisions: list = []
    for i, d in enumerate(decided):
        if d is None:
            decisions.append(Decision(ids[i], None))
            continue
        fp, earlier = d
        if earlier is None:
            entries.append((names[i], _line(names[i], fp, None)))
            decisions.append(Decision(ids[i], fp))
            continue
        of_seq, of_fp, distance, sim = earlier
        if of_seq in by_seq:
            of_id = ids[by_seq[of_seq]]
            of_name = names[by_seq[of_seq]]
        elif of_seq < len(log):
            of_name = log.name(of_seq)
            of_id = run.id_of(of_seq, of_name)
        else:
            of_id = of_name = str(of_seq)
        entries.append((names[i], _line(names[i], fp, (of_name, of_fp, distance, sim))))
        decisions.append(Decision(ids[i], fp, of_id, distance, None if sim is None else round(sim, 3)))
    log.append(entries)
    for kind, doc_id, what in plan:
        if kind == "logged":
            decision = _from_line(doc_id, what)
            if decision.duplicate_of is not None:
                # Named as a decision of this run names it.
                hit = log.logged(decision.duplicate_of)
                if hit is not None:
                    decision = decision._replace(duplicate_of=run.id_of(hit[0], decision.duplicate_of))
            yield decision
        else:
            yield decisions[what]
