#!/usr/bin/env python3
"""Grows a store through one `simstore add --ack` process, as a long-running
archive or crawler does: batches of `FP ID` lines (uniform fingerprints,
sequential ids), each waiting for its acknowledgement before the next is
sent. Prints the ingest rate over each twentieth of the way, the rate of the
last twentieth and the mean rate of the last quarter against the first, how
long batches waited for their acknowledgement, the CPU and peak memory, and
the bytes written against the bytes the store holds.

    python3 bench/grow_add.py --size 20000000 [--batch 10000] [--bin PATH] [--dir DIR]
"""
import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=20_000_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--bin", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "release", "simstore"))
    ap.add_argument("--dir", help="store directory (absent or empty; kept)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    tmp = None
    store = args.dir
    if store is None:
        tmp = tempfile.mkdtemp(prefix="simstore-grow-")
        store = os.path.join(tmp, "s")
    try:
        subprocess.run([args.bin, "create", store], check=True, stdout=subprocess.DEVNULL)
        add = subprocess.Popen([args.bin, "add", "--ack", store], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, bufsize=1)
        rng = random.Random(args.seed)
        step = max(args.size // 20, args.batch)
        sent = last = 0
        start = mark = time.time()
        rates = []
        # Seconds from handing a batch over to its acknowledgement.
        waits = []
        print(f"{'stored':>12} {'ingest/s':>10} {'elapsed s':>10}")
        while sent < args.size:
            n = min(args.batch, args.size - sent)
            lines = "".join(f"{rng.getrandbits(64):016x} {sent + i}\n" for i in range(n))
            asked = time.perf_counter()
            add.stdin.write(lines)
            add.stdin.flush()
            sent += n
            while True:
                line = add.stdout.readline()
                if not line:
                    sys.exit("simstore add exited early")
                if line.startswith("acked") and int(line.split()[1]) >= sent:
                    break
            waits.append(time.perf_counter() - asked)
            if sent - last >= step or sent == args.size:
                now = time.time()
                rates.append((sent - last) / (now - mark))
                print(f"{sent:>12} {rates[-1]:>10.0f} {now - start:>10.1f}", flush=True)
                mark, last = now, sent
        add.stdin.close()
        if add.wait() != 0:
            sys.exit(f"simstore add exited with {add.returncode}")
        # The last twentieth alone swings with whether a merge into level 0
        # fell in it; the last quarter's mean does much less.
        quarter = rates[-max(len(rates) // 4, 1):]
        mean = len(quarter) / sum(1 / r for r in quarter)
        print(f"first {rates[0]:.0f}/s, last {rates[-1]:.0f}/s, ratio {rates[-1] / rates[0]:.2f}, "
              f"last quarter {mean:.0f}/s ({mean / rates[0]:.2f} of first), "
              f"{time.time() - start:.0f} s in all")
        waits.sort()
        at = lambda q: waits[min(int(q * len(waits)), len(waits) - 1)] * 1e3
        print(f"acknowledged in (ms): median {at(0.5):.2f}, 99% {at(0.99):.2f}, "
              f"99.9% {at(0.999):.2f}, slowest {waits[-1] * 1e3:.1f}")
        # CPU time varies far less than wall time on a shared machine.
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = usage.ru_utime + usage.ru_stime
        print(f"simstore CPU {cpu:.0f} s (user {usage.ru_utime:.0f}, system {usage.ru_stime:.0f}), "
              f"{cpu / args.size * 1e6:.2f} us an insert, peak RSS {usage.ru_maxrss / 1024:.0f} MiB")
        # Write amplification: what the process wrote to files (the
        # kernel's count of 512-byte blocks, logs and flushes included)
        # against what the store holds at the end.
        written = usage.ru_oublock * 512
        held = sum(os.path.getsize(os.path.join(d, f))
                   for d, _, files in os.walk(store) for f in files)
        print(f"written {written / 1e9:.2f} GB for a store of {held / 1e9:.2f} GB: "
              f"{written / max(held, 1):.1f} bytes a byte held")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
