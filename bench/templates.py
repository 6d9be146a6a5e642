#!/usr/bin/env python3
"""Times `simstore dedup --similarity` on a crawl of one site whose pages share
a template: two fifths of the documents are the template (150 words) followed
by their own 30 words, similar to each other (Jaccard about 0.7) but none a
near-duplicate of another at 0.8; one in ten is an earlier template page again
with one word changed (a near-duplicate of it); the rest are distinct texts.
JSONL documents are fed in parts of 5,000 to the same store, one `dedup`
process a part. Prints each part's rate as `dedup` reports it, its wall time,
the share of the changed copies found and the pages reported as near-duplicates
that are none (the re-check's estimate clearing its bar for a pair of template
pages: rare, and more frequent as the template's pages grow in number).

    python3 bench/templates.py [--parts 8] [--bin PATH] [-- EXTRA DEDUP ARGS]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--similarity", default="0.8")
    ap.add_argument("--own-words", type=int, default=30,
                    help="words of its own after the template on a template page")
    ap.add_argument("--bin", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "release", "simstore"))
    ap.add_argument("extra", nargs="*", help="further `dedup` arguments")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="simstore-templates-")
    rng = random.Random(5)
    words = [f"w{i}" for i in range(5000)]
    template = " ".join(rng.choice(words) for _ in range(150))
    pages = []  # (id, words) of the template pages written so far
    store = os.path.join(root, "s")
    try:
        print(f"dedup --similarity {args.similarity} {' '.join(args.extra)}, parts of "
              f"{PART:,} documents: 2/5 template pages ({args.own_words} words of their own), "
              "1/10 changed copies of earlier ones")
        print("| documents stored before | documents/s | wall s | copies found | wrongly flagged |\n"
              "|---|---|---|---|---|")
        for part in range(args.parts):
            path = os.path.join(root, f"part{part}.jsonl")
            copies = {}  # copy id -> id of the page it changes
            with open(path, "w") as f:
                for i in range(PART):
                    n = part * PART + i
                    kind = i % 10
                    if kind < 4:
                        own = [rng.choice(words) for _ in range(args.own_words)]
                        pages.append((n, own))
                        text = template + " " + " ".join(own)
                    elif kind == 4:
                        source, own = rng.choice(pages)
                        own = list(own)
                        own[rng.randrange(len(own))] = rng.choice(words)
                        copies[n] = source
                        text = template + " " + " ".join(own)
                    else:
                        text = " ".join(rng.choice(words) for _ in range(200))
                    f.write(json.dumps({"id": n, "text": text}) + "\n")
            start = time.perf_counter()
            run = subprocess.run([args.bin, "dedup", "--similarity", args.similarity,
                                  *args.extra, "--jsonl", store, path],
                                 check=True, capture_output=True, text=True)
            wall = time.perf_counter() - start
            found = wrong = 0
            for line in run.stdout.splitlines():
                doc = json.loads(line)
                n = int(doc["id"])
                dup = doc["duplicate_of"]
                if n in copies:
                    found += dup is not None
                elif dup is not None:
                    wrong += 1
            rate = re.search(r"([0-9]+) documents/s", run.stderr)
            print(f"| {part * PART:,} | {rate.group(1) if rate else '?'} | {wall:.2f} "
                  f"| {found / max(len(copies), 1):.3f} | {wrong} |", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
