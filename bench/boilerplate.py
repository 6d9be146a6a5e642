#!/usr/bin/env python3
"""Times `simstore dedup --similarity` on a crawl where half the pages are one
boilerplate text (an empty or error page, shared by every such document), the
other half distinct texts: JSONL documents fed in parts of 5,000 to the same
store, one `dedup` process a part, so every part decides against all the
copies stored before it. Prints each part's rate as `dedup` reports it and its
wall time, and checks that every boilerplate page after the first is reported
as a near-duplicate of the first (similarity 1) and no other page is.

    python3 bench/boilerplate.py [--parts 6] [--bin PATH]
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time

PART = 5_000
BOILERPLATE = "this page intentionally left blank please come back later " * 3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=6)
    ap.add_argument("--similarity", default="0.8")
    ap.add_argument("--bin", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "release", "simstore"))
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="simstore-boilerplate-")
    rng = random.Random(3)
    words = [f"w{i}" for i in range(5000)]
    store = os.path.join(root, "s")
    try:
        print(f"dedup --similarity {args.similarity}, parts of {PART:,} documents, "
              "every other one the boilerplate page")
        print("| documents stored before | documents/s | wall s |\n|---|---|---|")
        for part in range(args.parts):
            path = os.path.join(root, f"part{part}.jsonl")
            with open(path, "w") as f:
                for i in range(PART):
                    n = part * PART + i
                    text = BOILERPLATE if i % 2 == 0 else " ".join(
                        rng.choice(words) for _ in range(200))
                    f.write(json.dumps({"id": n, "text": text}) + "\n")
            start = time.perf_counter()
            run = subprocess.run([args.bin, "dedup", "--similarity", args.similarity,
                                  "--jsonl", store, path],
                                 check=True, capture_output=True, text=True)
            wall = time.perf_counter() - start
            for line in run.stdout.splitlines():
                doc = json.loads(line)
                n = int(doc["id"])
                dup = doc["duplicate_of"]
                boiler = n % 2 == 0
                if boiler and n > 0:
                    ok = dup is not None and dup["id"] == "0" and dup["similarity"] == 1.0
                else:
                    ok = dup is None
                if not ok:
                    raise SystemExit(f"document {n}: unexpected decision {dup}")
            rate = re.search(r"([0-9]+) documents/s", run.stderr)
            print(f"| {part * PART:,} | {rate.group(1) if rate else '?'} | {wall:.2f} |",
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
