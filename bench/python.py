#!/usr/bin/env python3
"""The Python package against the Rust library and the command line, on
one machine, in one run:

* ``insert_many`` of N (fingerprint, id) pairs into an empty store (one
  call, and in calls of 100K), against ``simstore add`` of the same pairs
  as ``FP ID`` lines;
* ``query_many`` of Q numpy fingerprints against the library's batch call
  (``simstore-bench batch``) on the same store and queries, the call alone
  in both, tables in memory; ``query_many(first=True)``; and ``simstore
  query --batch`` (and ``--batch --first``) as a whole process for
  reference;
* ``Fingerprinter.fingerprint_many`` against ``simstore hash --jsonl`` on
  the same documents, both on every core.

Fingerprints are uniform; ids sequential, with 1% of the fingerprints
carrying a second id. Half the queries lie within 0-3 bits of a stored
fingerprint, half are uniform. Prints a Markdown table and, with --json,
the figures as JSON.

    python3 bench/python.py [--size 10000000] [--queries 1000000]

Needs the package installed (``pip install ./python``) and the release
binaries built (``cargo build --release --workspace``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import simstore


def target_dir() -> str:
    return os.environ.get("CARGO_TARGET_DIR") or os.path.join(os.path.dirname(__file__), "..", "target")


def pairs(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    unique = n - n // 100
    fps = rng.integers(0, 2**64, size=unique, dtype=np.uint64, endpoint=False)
    again = fps[rng.integers(0, unique, size=n - unique)]
    all_fps = np.concatenate([fps, again])
    ids = np.arange(n, dtype=np.uint64)
    return all_fps, ids


def queries(fps: np.ndarray, q: int, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    near = fps[rng.integers(0, len(fps), size=q // 2)].copy()
    for _ in range(3):
        # Each of three rounds flips one random bit in a random half.
        mask = rng.random(len(near)) < 0.5
        bits = rng.integers(0, 64, size=len(near)).astype(np.uint64)
        near[mask] ^= np.uint64(1) << bits[mask]
    far = rng.integers(0, 2**64, size=q - q // 2, dtype=np.uint64, endpoint=False)
    out = np.concatenate([near, far])
    rng.shuffle(out)
    return out


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def corpus(limit: int):
    """Text documents from the machine's /usr/share/doc (plain text files,
    gzip-compressed ones unpacked), up to `limit`."""
    import gzip

    docs = []
    for root, _, files in os.walk("/usr/share/doc"):
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                if name.endswith(".gz"):
                    with gzip.open(path, "rt", errors="replace") as f:
                        text = f.read()
                elif "." not in name or name.endswith((".txt", ".md", ".html", ".rst")):
                    with open(path, errors="replace") as f:
                        text = f.read()
                else:
                    continue
            except OSError:
                continue
            if text.strip():
                docs.append((path, text))
            if len(docs) >= limit:
                return docs
    return docs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=10_000_000)
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--documents", type=int, default=20_000)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cli = os.path.join(target_dir(), "release", "simstore")
    bench = os.path.join(target_dir(), "release", "simstore-bench")
    for b in (cli, bench):
        if not os.path.exists(b):
            sys.exit(f"{b} is missing: cargo build --release --workspace")
    scratch = args.dir or tempfile.mkdtemp(prefix="simstore-pybench-")
    os.makedirs(scratch, exist_ok=True)
    out = {"size": args.size, "queries": args.queries, "cpus": os.cpu_count()}
    n = args.size
    fps, ids = pairs(n)

    # Ingest: the package in one call, in calls of 100K, and the command.
    one = os.path.join(scratch, "one")
    t, _ = timed(lambda: simstore.Store.create(one, expected_size=n).insert_many(fps, ids))
    out["insert_many_one_call_s"] = t
    chunked = os.path.join(scratch, "chunked")
    with simstore.Store.create(chunked, expected_size=n) as s:
        t0 = time.perf_counter()
        for i in range(0, n, 100_000):
            s.insert_many(fps[i : i + 100_000], ids[i : i + 100_000])
        out["insert_many_100k_calls_s"] = time.perf_counter() - t0
    shutil.rmtree(chunked)
    lines = os.path.join(scratch, "pairs.txt")
    with open(lines, "w") as f:
        for i in range(0, n, 1_000_000):
            block = [f"{a:016x} {b}" for a, b in zip(fps[i : i + 1_000_000].tolist(), ids[i : i + 1_000_000].tolist())]
            f.write("\n".join(block) + "\n")
    cli_store = os.path.join(scratch, "cli")
    subprocess.run([cli, "create", cli_store, "--expected-size", str(n)], check=True, capture_output=True)
    with open(lines) as f:
        t, _ = timed(lambda: subprocess.run([cli, "add", cli_store], stdin=f, check=True, capture_output=True))
    out["cli_add_s"] = t
    shutil.rmtree(cli_store)
    os.remove(lines)

    # Batch queries on the store loaded in one call.
    qs = queries(fps, args.queries)
    qfile = os.path.join(scratch, "queries.u64")
    qs.astype("<u8").tofile(qfile)
    py_times, rust_times, first_times = [], [], []
    rows = None
    for _ in range(2):
        with simstore.Store.open(one) as s:
            s.wait_warm()
            s.query_many(qs[:10_000], 3)
            for _ in range(args.repeat):
                t, r = timed(lambda: s.query_many(qs, 3))
                py_times.append(t)
                rows = len(r.id)
                t, _ = timed(lambda: s.query_many(qs, 3, first=True))
                first_times.append(t)
        r = subprocess.run([bench, "batch", one, qfile, "--k", "3", "--repeat", str(args.repeat)], check=True, capture_output=True, text=True)
        got = json.loads(r.stdout)
        rust_times.extend(got["times"])
        if got["rows"] != rows:
            sys.exit(f"rows differ: Python {rows}, Rust {got['rows']}")
    out["query_rows"] = rows
    out["query_many_python_s"] = min(py_times)
    out["query_many_first_python_s"] = min(first_times)
    out["query_many_rust_s"] = min(rust_times)
    out["query_many_python_mean_s"] = sum(py_times) / len(py_times)
    out["query_many_rust_mean_s"] = sum(rust_times) / len(rust_times)
    text = os.path.join(scratch, "queries.txt")
    with open(text, "w") as f:
        f.write("\n".join(f"{v:016x}" for v in qs.tolist()) + "\n")
    with open(text) as f:
        t, _ = timed(lambda: subprocess.run([cli, "query", one, "--batch"], stdin=f, check=True, stdout=subprocess.DEVNULL))
    out["cli_query_batch_process_s"] = t
    with open(text) as f:
        t, _ = timed(lambda: subprocess.run([cli, "query", one, "--batch", "--first"], stdin=f, check=True, stdout=subprocess.DEVNULL))
    out["cli_query_batch_first_process_s"] = t

    # Fingerprinting.
    docs = corpus(args.documents)
    jsonl = os.path.join(scratch, "docs.jsonl")
    with open(jsonl, "w") as f:
        for name, body in docs:
            f.write(json.dumps({"id": name, "text": body}) + "\n")
    texts = [body for _, body in docs]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    fp = simstore.Fingerprinter()
    fp.fingerprint_many(texts[:100])
    t_py = min(timed(lambda: fp.fingerprint_many(texts))[0] for _ in range(args.repeat))
    t_cli = min(
        timed(lambda: subprocess.run([cli, "hash", "--jsonl", jsonl], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))[0]
        for _ in range(args.repeat)
    )
    out.update(documents=len(texts), document_mb=mb, fingerprint_many_s=t_py, cli_hash_s=t_cli)
    if not args.dir:
        shutil.rmtree(scratch)

    q = args.queries
    print(f"| {n:,} pairs, {q:,} queries, k = 3, {os.cpu_count()} CPUs | time | rate | ratio |")
    print("|---|---|---|---|")
    print(f"| `insert_many`, one call | {out['insert_many_one_call_s']:.2f} s | {n / out['insert_many_one_call_s'] / 1e6:.2f}M pairs/s | {out['cli_add_s'] / out['insert_many_one_call_s']:.2f}x `simstore add` |")
    print(f"| `insert_many`, calls of 100K | {out['insert_many_100k_calls_s']:.2f} s | {n / out['insert_many_100k_calls_s'] / 1e6:.2f}M pairs/s | |")
    print(f"| `simstore add` (FP ID lines, whole process) | {out['cli_add_s']:.2f} s | {n / out['cli_add_s'] / 1e6:.2f}M lines/s | 1 |")
    print(f"| `query_many` (numpy in, numpy out), best of {len(py_times)} | {out['query_many_python_s']:.3f} s | {q / out['query_many_python_s'] / 1e3:.0f}K q/s | {out['query_many_python_s'] / out['query_many_rust_s']:.3f}x the library |")
    print(f"| `query_many(first=True)`, best of {len(first_times)} | {out['query_many_first_python_s']:.3f} s | {q / out['query_many_first_python_s'] / 1e3:.0f}K q/s | |")
    print(f"| library `Store::query_many`, best of {len(rust_times)} | {out['query_many_rust_s']:.3f} s | {q / out['query_many_rust_s'] / 1e3:.0f}K q/s | 1 |")
    print(f"| `simstore query --batch` (whole process, open and text included) | {out['cli_query_batch_process_s']:.2f} s | {q / out['cli_query_batch_process_s'] / 1e3:.0f}K q/s | |")
    print(f"| `simstore query --batch --first` (whole process) | {out['cli_query_batch_first_process_s']:.2f} s | {q / out['cli_query_batch_first_process_s'] / 1e3:.0f}K q/s | |")
    print(f"| `fingerprint_many`, {len(texts):,} documents ({mb:.0f} MB) | {t_py:.2f} s | {len(texts) / t_py:,.0f} docs/s | {t_cli / t_py:.2f}x `simstore hash` |")
    print(f"| `simstore hash --jsonl` (whole process) | {t_cli:.2f} s | {len(texts) / t_cli:,.0f} docs/s | 1 |")
    print(f"\nquery rows (match, id): {rows:,}; mean query_many: Python {out['query_many_python_mean_s']:.3f} s, library {out['query_many_rust_mean_s']:.3f} s")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
