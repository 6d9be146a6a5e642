#!/usr/bin/env python3
"""Times small write groups that name a fingerprint with many ids (the empty
page of a crawl, shared by every empty document), through one
`simstore add --ack` process: batches of 10 `FP ID` lines, nine new
fingerprints and one new id of that fingerprint, each waiting for its
acknowledgement. Three stores of 100,000 other fingerprints: one where the
fingerprint has a single id, one where its ids are in its id block (added in
one `add`, merged), one where they were added since (batches of 10,000 after a
`compact`: overlay entries). Prints the mean time a batch for each, and checks
the fingerprint's ids afterwards with `query`. Then times `simstore query`
(whole process) of Q queries, half one bit from that fingerprint and half one
bit from others, listing every id and with `--max-ids 1` (whose answers are
checked: the smallest id and the count).

    python3 bench/hot_ids.py [--ids 300000] [--batches 2000] [--queries 2000] [--bin PATH]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile
import time

HOT = 0xFF


def acked(bin_, store, batches):
    """Sends each batch of lines to one `add --ack` process, waiting for its
    acknowledgement; returns the seconds taken."""
    add = subprocess.Popen([bin_, "add", "--ack", store], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, bufsize=1)
    sent = 0
    start = time.perf_counter()
    for lines in batches:
        add.stdin.write("".join(lines))
        add.stdin.flush()
        sent += len(lines)
        while True:
            line = add.stdout.readline()
            if not line:
                raise SystemExit("add exited early")
            if line.startswith("acked") and int(line.split()[1]) >= sent:
                break
    took = time.perf_counter() - start
    add.stdin.close()
    if add.wait() != 0:
        raise SystemExit("add failed")
    return took


def timed_queries(bin_, store, lines, more):
    """Seconds `simstore query` takes to answer `lines` (whole process), its
    output thrown away, with the extra arguments `more`."""
    start = time.perf_counter()
    subprocess.run([bin_, "query", *more, store], input=lines, check=True, text=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def run(bin_, root, where, n_ids, n_batches, n_queries):
    store = os.path.join(root, where)
    subprocess.run([bin_, "create", store], check=True, stdout=subprocess.DEVNULL)
    rng = random.Random(7)
    others = "".join(f"{rng.getrandbits(64):016x} {i}\n" for i in range(100_000))
    hot_ids = [10**6 + i for i in range(n_ids if where != "one id" else 1)]
    if where == "in its id block":
        others += "".join(f"{HOT:016x} {i}\n" for i in hot_ids)
    else:
        others += f"{HOT:016x} {hot_ids[0]}\n"
    subprocess.run([bin_, "add", store], input=others, check=True, text=True)
    subprocess.run([bin_, "compact", store], check=True, capture_output=True)
    if where == "added since its id block":
        rest = hot_ids[1:]
        acked(bin_, store, ([f"{HOT:016x} {i}\n" for i in rest[at:at + 10_000]]
                            for at in range(0, len(rest), 10_000)))
    next_id = 10**8

    def small():
        nonlocal next_id
        for _ in range(n_batches):
            lines = [f"{rng.getrandbits(64):016x} {next_id + i}\n" for i in range(9)]
            next_id += 10
            lines.append(f"{HOT:016x} {next_id}\n")
            hot_ids.append(next_id)
            yield lines

    took = acked(bin_, store, small())
    out = subprocess.run([bin_, "query", store], input=f"{HOT:016x}\n", check=True,
                         capture_output=True, text=True).stdout
    got = next(m["ids"] for m in json.loads(out)["matches"] if int(m["fingerprint"], 16) == HOT)
    if got != hot_ids:
        raise SystemExit(f"{where}: the fingerprint's ids differ from those sent")
    # Queries: half one bit from the fingerprint, half one bit from others.
    other_fps = [int(line.split()[0], 16) for line in others.splitlines()[:100_000]]
    qs = [HOT ^ (1 << rng.randrange(64)) if i % 2 == 0 else
          rng.choice(other_fps) ^ (1 << rng.randrange(64)) for i in range(n_queries)]
    lines = "".join(f"{q:016x}\n" for q in qs)
    all_ids = timed_queries(bin_, store, lines, [])
    one_id = timed_queries(bin_, store, lines, ["--max-ids", "1"])
    out = subprocess.run([bin_, "query", "--max-ids", "1", store], input=lines, check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        for m in json.loads(line)["matches"]:
            if int(m["fingerprint"], 16) == HOT and (m["ids"] != hot_ids[:1]
                                                     or m["id_count"] != len(hot_ids)):
                raise SystemExit(f"{where}: --max-ids 1 listed {m['ids']}, {m['id_count']}")
    return took, all_ids, one_id


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", type=int, default=300_000)
    ap.add_argument("--batches", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=2_000)
    ap.add_argument("--bin", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "release", "simstore"))
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="simstore-hot-")
    try:
        print(f"{args.batches} add --ack batches of 10 lines, one a new id of the fingerprint")
        print(f"and {args.queries} queries, half one bit from it (`simstore query`, whole process)")
        print("| the fingerprint's ids | ms a batch | query s, every id | query s, --max-ids 1 |")
        print("|---|---|---|---|")
        for where in ["one id", "in its id block", "added since its id block"]:
            took, all_ids, one_id = run(args.bin, root, where, args.ids, args.batches,
                                        args.queries)
            label = where if where == "one id" else f"{args.ids:,} {where}"
            print(f"| {label} | {took / args.batches * 1e3:.3f} | {all_ids:.2f} | {one_id:.2f} |",
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
