#!/usr/bin/env python3
"""simstore against FAISS binary multi-hash indexes, mih-rs and a brute-force scan,
on the same fingerprints and queries, in one run.

    pip install faiss-cpu numpy
    cargo build --release   # and bench/mih (mih-rs) is built on first use
    python3 bench/peers.py --size 1000000 --queries 100000 [--bin PATH]

Every stored row carries a document id, its row number, as a crawler's
store would: simstore is given `FP ID` lines, and FAISS and mih-rs return
row numbers, which are those ids. Most fingerprints have one row; a small
share have several (2% of rows repeat an earlier fingerprint, and one
fingerprint stands for 1,000 rows, as an empty page does in a crawl).

simstore is driven through its command line exactly as a harness would
(each query command run `--rounds` times, the fastest counting):
`create`, `add` (the bulk path), then `query` (all matches), `query --first`
and `query --batch` as whole processes, so its figures include process
start, opening the store and printing JSON; the time of the same query
command on ten queries (start, open, warming) is reported separately and
subtracted for the per-query rates. One comparison row queries the same
fingerprints stored without ids. FAISS runs in this process with one OpenMP thread, over all queries
in one call (its best case). Every answer is checked against a brute-force
scan for a sample of queries, and simstore's and FAISS's match counts must
agree for all of them. Peers are a benchmark-only dependency: nothing here
is used by the library.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def fingerprints(n, q, seed):
    """`n` stored rows (row i has id i) and `q` queries."""
    rng = np.random.default_rng(seed)
    stored = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    # 2% of rows repeat an earlier row's fingerprint (a page seen again
    # under another id), and one fingerprint has 1,000 rows.
    repeats = rng.choice(np.arange(n // 2, n), size=n // 50, replace=False)
    stored[repeats] = stored[rng.integers(0, n // 2, size=n // 50)]
    if n >= 10_000:
        stored[n - 1000:] = stored[1]
    queries = rng.integers(0, 2**64, size=q, dtype=np.uint64)
    # Half the queries lie 0..3 bits from a stored fingerprint.
    near = stored[rng.integers(0, n, size=q // 2)]
    for i in range(q // 2):
        for b in rng.choice(64, size=i % 4, replace=False):
            near[i] ^= np.uint64(1) << np.uint64(b)
    queries[: q // 2] = near
    return stored, queries


def hex_lines(values):
    return "".join(f"{int(v):016x}\n" for v in values).encode()


def pair_lines(values):
    """`FP ID` lines, the id being the row number."""
    return "".join(f"{int(v):016x} {i}\n" for i, v in enumerate(values)).encode()


def popcount64(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


def brute(stored, q, k):
    """The (fingerprint, ids) pairs within `k` of `q`, ids being row numbers."""
    d = popcount64(np.bitwise_xor(stored, np.uint64(q)))
    rows = np.flatnonzero(d <= k)
    found = {}
    for r in rows:
        found.setdefault(int(stored[r]), []).append(int(r))
    return sorted((fp, sorted(ids)) for fp, ids in found.items())


def run(cmd, data=b""):
    started = time.perf_counter()
    out = subprocess.run(cmd, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - started
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr.decode()}")
    return out.stdout, elapsed


def fastest(cmd, data, rounds):
    """The output and the fastest time of `rounds` runs (a shared machine
    slows some runs, never speeds one up)."""
    out, best = run(cmd, data)
    for _ in range(rounds - 1):
        again, t = run(cmd, data)
        if again != out:
            sys.exit(f"{' '.join(cmd)}: output differs between runs")
        best = min(best, t)
    return out, best


def peak_rss_mb(cmd, data=b""):
    """Peak resident set of one run of `cmd`, in MB (GNU time's %M)."""
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, input=data,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    return int(out.stderr.decode().split()[-1]) / 1024


def as_bytes(values):
    # FAISS binary vectors: 8 bytes per code; the bit order does not matter
    # for Hamming distance as long as queries use the same one.
    return np.ascontiguousarray(values.astype("<u8")).view(np.uint8).reshape(-1, 8)


def faiss_index(faiss, stored, nhash, b, nflip):
    index = faiss.IndexBinaryMultiHash(64, nhash, b)
    index.nflip = nflip
    index.add(as_bytes(stored))
    return index


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "simstore"))
    p.add_argument("--check", type=int, default=300, help="queries checked against brute force")
    p.add_argument("--rounds", type=int, default=3,
                   help="runs of each simstore query command; the fastest counts")
    p.add_argument("--without-mih", action="store_true",
                   help="skip mih-rs (bench/mih, built here with cargo from crates.io)")
    a = p.parse_args()
    import faiss

    faiss.omp_set_num_threads(1)
    n, nq, k = a.size, a.queries, a.k
    stored, queries = fingerprints(n, nq, 7)
    qlines = hex_lines(queries)
    print(f"peers: N = {n} uniform, Q = {nq} (half within 3 bits of a stored one), k = {k}, 1 thread, warm where stated")

    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "s")
        run([a.bin, "create", d, "--max-distance", str(k), "--expected-size", str(n)])
        _, t_add = run([a.bin, "add", d, "--durability", "buffered"], pair_lines(stored))
        stats = json.loads(run([a.bin, "stats", d])[0])
        ten = b"".join(qlines.splitlines(keepends=True)[:10])
        q = [a.bin, "query", d, "--max-distance", str(k)]
        _, t_open = fastest(q, ten, a.rounds)
        out_all, t_all = fastest(q, qlines, a.rounds)
        _, t_first = fastest(q + ["--first"], qlines, a.rounds)
        out_batch, t_batch = fastest(q + ["--batch"], qlines, a.rounds)
        if out_all != out_batch:
            sys.exit("simstore: --batch output differs from per-query output")
        answers = [json.loads(line)["matches"] for line in out_all.decode().splitlines()]
        # Rows (pairs) per query: what FAISS and mih-rs count.
        counts = [sum(len(m["ids"]) for m in ms) for ms in answers]
        per_table = stats["table_bytes"] / (stats["fingerprints"] * stats["tables"])
        bound = (64 - np.log2(stats["fingerprints"]) + 1.44) / 8
        print(f"simstore: add {n / t_add:,.0f} lines/s (whole process, FP ID lines); "
              f"{stats['fingerprints']} fingerprints with {stats['ids']} ids; {stats['tables']} tables of "
              f"{stats['prefix_bits']}-bit prefixes; {per_table:.3f} B/fp/table (bound {bound:.3f}); "
              f"{stats['bytes_on_disk'] / n:.2f} B/row on disk in all")
        print(f"simstore: the same query command on 10 queries (start, open, warming) "
              f"{t_open * 1000:.0f} ms")
        if os.path.exists("/usr/bin/time"):
            rss = peak_rss_mb([a.bin, "query", d, "--max-distance", str(k)], qlines)
            ids_bytes = stats["id_bytes"]
            stored_mb = (stats["table_bytes"] + ids_bytes) / 2**20
            print(f"simstore query: peak RSS {rss:,.0f} MB, {rss / stored_mb:.2f}x the tables' "
                  f"{stats['table_bytes'] / 2**20:,.0f} MB plus ids' {ids_bytes / 2**20:,.0f} MB as stored")

        def rate(t):
            return nq / max(t - t_open, 1e-9)

        print(f"simstore query (all):   {rate(t_all):>10,.0f} q/s   ({nq / t_all:,.0f} q/s whole process)")
        print(f"simstore query --first: {rate(t_first):>10,.0f} q/s   ({nq / t_first:,.0f} q/s whole process)")
        print(f"simstore query --batch: {rate(t_batch):>10,.0f} q/s   ({nq / t_batch:,.0f} q/s whole process)")
        found_ids = sum(counts)
        print(f"simstore: {sum(len(ms) for ms in answers):,} matches carrying {found_ids:,} ids")

        # Comparison row: the same fingerprints stored without ids.
        d2 = os.path.join(tmp, "no-ids")
        run([a.bin, "create", d2, "--max-distance", str(k), "--expected-size", str(n)])
        run([a.bin, "add", d2, "--durability", "buffered"], hex_lines(np.unique(stored)))
        q2 = [a.bin, "query", d2, "--max-distance", str(k)]
        _, t_open2 = fastest(q2, ten, a.rounds)
        _, t_all2 = fastest(q2, qlines, a.rounds)
        rate2 = nq / max(t_all2 - t_open2, 1e-9)
        print(f"comparison, the same fingerprints without ids: query (all) {rate2:>10,.0f} q/s; "
              f"with ids {100 * rate(t_all) / rate2:.0f}% of it")

    best_peer = 0.0
    for nhash, b, nflip in [(4, 16, 0), (2, 32, 1)]:
        started = time.perf_counter()
        index = faiss_index(faiss, stored, nhash, b, nflip)
        built = time.perf_counter() - started
        qb = as_bytes(queries)
        started = time.perf_counter()
        lims, _, _ = index.range_search(qb, k + 1)
        t = time.perf_counter() - started
        fc = np.diff(lims)
        # Multi-hash with these settings is exact for k = 3 only when every
        # answer shares a whole hash chunk: count how many it missed.
        missed = int(np.sum(np.maximum(np.array(counts) - fc, 0)))
        print(f"faiss IndexBinaryMultiHash {nhash}x{b} nflip={nflip}: {nq / t:>10,.0f} q/s "
              f"(build {built:.1f} s; {missed} matches missed vs simstore)")
        best_peer = max(best_peer, nq / t)
        del index
    print(f"ratio simstore all-matches / best FAISS: {rate(t_all) / best_peer:.2f}x; "
          f"batch / best FAISS: {rate(t_batch) / best_peer:.2f}x")

    # mih-rs (exact multi-index hashing, parameters chosen by the crate),
    # through a benchmark-only binary built from bench/mih.
    mih = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mih")
    if not a.without_mih:
        # Its own target directory, whatever CARGO_TARGET_DIR says, so the
        # binary is where this script looks for it.
        mih_target = os.path.join(mih, "target")
        subprocess.run(["cargo", "build", "--release", "--quiet", "--target-dir", mih_target],
                       cwd=mih, check=True)
        with tempfile.TemporaryDirectory() as tmp:
            sp, qp = os.path.join(tmp, "stored"), os.path.join(tmp, "queries")
            with open(sp, "wb") as f:
                f.write(hex_lines(stored))
            with open(qp, "wb") as f:
                f.write(qlines)
            out, _ = run([os.path.join(mih_target, "release", "simstore-peer-mih"), sp, qp, str(k)])
        lines = out.decode().splitlines()
        if [int(c) for c in lines[1:]] != counts:
            sys.exit("mih-rs: match counts differ from simstore's")
        mih_rate = float(lines[0].split(";")[1].split()[0])
        print(f"{lines[0]} (same match counts as simstore)")
        print(f"ratio simstore all-matches / mih-rs: {rate(t_all) / mih_rate:.2f}x; "
              f"batch / mih-rs: {rate(t_batch) / mih_rate:.2f}x")

    sample = range(0, nq, max(1, nq // a.check))
    started = time.perf_counter()
    for i in sample:
        expect = brute(stored, queries[i], k)
        got = sorted((int(m["fingerprint"], 16), m["ids"]) for m in answers[i])
        if got != expect:
            sys.exit(f"query {i}: simstore found {got}, brute force {expect}")
    scan = len(sample) / (time.perf_counter() - started)
    print(f"brute-force scan (numpy): {scan:,.0f} q/s; {len(sample)} simstore answers checked "
          f"against it, fingerprints and ids, all exact")


if __name__ == "__main__":
    main()
