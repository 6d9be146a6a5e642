//! Shared test helpers: data generators and the brute-force oracle.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

pub mod workload;

/// SplitMix64: small, deterministic, good enough for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// `fp` with exactly `bits` distinct bits flipped.
    pub fn flip(&mut self, fp: u64, bits: u32) -> u64 {
        let mut out = fp;
        while (out ^ fp).count_ones() < bits {
            out ^= 1u64 << self.below(64);
        }
        out
    }
}

/// Uniformly random fingerprints.
pub fn random(n: usize, rng: &mut Rng) -> Vec<u64> {
    (0..n).map(|_| rng.next()).collect()
}

/// Near-duplicate-heavy fingerprints: a few cluster centres, members a few
/// bits away, many exact duplicates, an all-zero spike and a dense run of
/// consecutive values.
pub fn clustered(n: usize, rng: &mut Rng) -> Vec<u64> {
    let centres: Vec<u64> = (0..(n / 50).max(2)).map(|_| rng.next()).collect();
    (0..n)
        .map(|i| match rng.below(10) {
            0 => 0,
            1 => u64::MAX - (i as u64 % 3),
            2 => 0x5555_0000_0000_0000 + (i as u64 % 500),
            3 | 4 => centres[rng.below(centres.len() as u64) as usize],
            _ => {
                let c = centres[rng.below(centres.len() as u64) as usize];
                let bits = 1 + rng.below(4) as u32;
                rng.flip(c, bits)
            }
        })
        .collect()
}

/// Queries for a stored set: stored values, values 1..=4 bits away, random.
pub fn queries(stored: &[u64], n: usize, rng: &mut Rng) -> Vec<u64> {
    (0..n)
        .map(|i| {
            if stored.is_empty() || i % 4 == 3 {
                return rng.next();
            }
            let base = stored[rng.below(stored.len() as u64) as usize];
            let bits = (i % 5) as u32;
            rng.flip(base, bits)
        })
        .collect()
}

/// The model: fingerprint -> ids.
#[derive(Debug, Default, Clone)]
pub struct Model {
    pub fps: BTreeMap<u64, BTreeSet<u64>>,
}

impl Model {
    pub fn insert(&mut self, fp: u64, id: Option<u64>) {
        let ids = self.fps.entry(fp).or_default();
        if let Some(id) = id {
            ids.insert(id);
        }
    }

    pub fn delete(&mut self, fp: u64, id: u64) {
        if let Some(ids) = self.fps.get_mut(&fp) {
            if ids.remove(&id) && ids.is_empty() {
                self.fps.remove(&fp);
            }
        }
    }

    pub fn delete_fingerprint(&mut self, fp: u64) {
        self.fps.remove(&fp);
    }

    /// Brute force: (distance, fingerprint, ids) sorted by distance then fp.
    pub fn query(&self, q: u64, k: u32) -> Vec<(u32, u64, Vec<u64>)> {
        let mut v: Vec<(u32, u64, Vec<u64>)> = self
            .fps
            .iter()
            .filter_map(|(&f, ids)| {
                let d = (f ^ q).count_ones();
                // Ids copied for the matches only: the model grows large
                // in the long crash and power-loss runs.
                (d <= k).then(|| (d, f, ids.iter().copied().collect()))
            })
            .collect();
        v.sort();
        v
    }

    pub fn ids(&self) -> u64 {
        self.fps.values().map(|s| s.len() as u64).sum()
    }
}

/// A store's answer in the model's shape.
pub fn shape(matches: &[simstore::Match]) -> Vec<(u32, u64, Vec<u64>)> {
    matches
        .iter()
        .map(|m| (m.distance, m.fingerprint, m.ids.clone()))
        .collect()
}

/// Checks every query path against the model for the given queries and
/// every distance up to the store's maximum.
pub fn check_store(store: &simstore::Store, model: &Model, queries: &[u64]) {
    // The oracle's answers at the largest distance, each smaller one cut
    // from them: one walk of the model a query (it grows large in the
    // long crash and power-loss runs).
    let largest = store.max_distance();
    let fps: Vec<u64> = model.fps.keys().copied().collect();
    let widest: Vec<Vec<(u32, u64)>> = queries
        .iter()
        .map(|&q| {
            let mut near: Vec<(u32, u64)> = fps
                .iter()
                .map(|&f| ((f ^ q).count_ones(), f))
                .filter(|&(d, _)| d <= largest)
                .collect();
            near.sort_unstable();
            near
        })
        .collect();
    for k in 0..=largest {
        let many = store.query_many(queries, k).unwrap();
        assert_eq!(many.len(), queries.len());
        let first_many = store.query_first_many(queries, k).unwrap();
        assert_eq!(first_many.len(), queries.len());
        for (i, &q) in queries.iter().enumerate() {
            let expect: Vec<(u32, u64, Vec<u64>)> = widest[i]
                .iter()
                .take_while(|&&(d, _)| d <= k)
                .map(|&(d, f)| (d, f, model.fps[&f].iter().copied().collect()))
                .collect();
            let got = shape(&store.query(q, k).unwrap());
            assert_eq!(got, expect, "query {q:016x} k={k}");

            assert_eq!(shape(&many[i]), expect, "query_many {q:016x} k={k}");
            for first in [store.query_first(q, k).unwrap(), first_many[i].clone()] {
                match first {
                    Some(m) => assert!(
                        expect.contains(&(m.distance, m.fingerprint, m.ids.clone())),
                        "first {q:016x}"
                    ),
                    None => assert!(expect.is_empty(), "first-match missed {q:016x} k={k}"),
                }
            }
        }
    }
    check_answers_into(store, model, queries, &widest);
    let stats = store.stats();
    assert_eq!(
        stats.fingerprints,
        model.fps.len() as u64,
        "fingerprint count"
    );
    assert_eq!(stats.ids, model.ids(), "id count");
    check_export(store, model);
}

/// Checks [`simstore::Store::query_many_into`] against the model (`widest`:
/// each query's `(distance, fingerprint)` at the store's largest
/// distance, sorted), one [`simstore::Answers`] reused by every call: all
/// matches and first match, with every id and with a few listed, on all
/// the queries and on the first half of them.
fn check_answers_into(
    store: &simstore::Store,
    model: &Model,
    queries: &[u64],
    widest: &[Vec<(u32, u64)>],
) {
    let mut answers = simstore::Answers::new();
    let ways = [
        (false, None),
        (true, None),
        (false, Some(1)),
        (true, Some(0)),
    ];
    for k in 0..=store.max_distance() {
        for (n, (first, max_ids)) in ways.into_iter().enumerate() {
            let asked = if n % 2 == 0 {
                queries
            } else {
                &queries[..queries.len() / 2]
            };
            store
                .query_many_into(asked, k, first, max_ids, &mut answers)
                .unwrap();
            assert_eq!(answers.len(), asked.len());
            for (i, got) in answers.iter().enumerate() {
                let q = asked[i];
                let expect: Vec<(u32, u64)> = widest[i]
                    .iter()
                    .copied()
                    .take_while(|&(d, _)| d <= k)
                    .collect();
                let got: Vec<simstore::MatchRef<'_>> = got.collect();
                let near: Vec<(u32, u64)> =
                    got.iter().map(|m| (m.distance, m.fingerprint)).collect();
                if first {
                    assert_eq!(got.len(), expect.len().min(1), "first {q:016x} k={k}");
                    assert!(near.iter().all(|m| expect.contains(m)), "first {q:016x}");
                } else {
                    assert_eq!(near, expect, "query_many_into {q:016x} k={k}");
                }
                for m in got {
                    let ids: Vec<u64> = model.fps[&m.fingerprint].iter().copied().collect();
                    let listed = max_ids.unwrap_or(usize::MAX).min(ids.len());
                    assert_eq!(m.ids, &ids[..listed], "ids of {:016x}", m.fingerprint);
                    assert_eq!(m.id_count, ids.len(), "id count of {:016x}", m.fingerprint);
                }
            }
        }
    }
}

/// Checks that [`simstore::Store::export`] gives exactly the model, in
/// order.
pub fn check_export(store: &simstore::Store, model: &Model) {
    let mut got = Vec::with_capacity(model.fps.len());
    let given = store
        .export(|fp, ids| {
            got.push((fp, ids.to_vec()));
            true
        })
        .unwrap();
    assert_eq!(given, got.len() as u64);
    assert_eq!(got.len(), model.fps.len(), "fingerprints exported");
    for ((fp, ids), (&f, want)) in got.iter().zip(&model.fps) {
        assert_eq!(*fp, f, "exported fingerprint");
        assert!(ids.iter().eq(want.iter()), "ids exported for {f:016x}");
    }
}

/// Runs the program `bin` with `args`, feeding `stdin`.
pub fn run_bin(bin: &str, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// [`run_bin`], which must succeed; its standard output.
pub fn ok_bin(bin: &str, args: &[&str], stdin: &str) -> String {
    let out = run_bin(bin, args, stdin);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The `copyright` files of every package on this Debian machine: real
/// text with many natural near-duplicates (license boilerplate).
pub fn copyright_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir("/usr/share/doc")
        .expect("/usr/share/doc")
        .filter_map(|e| {
            let p = e.ok()?.path().join("copyright");
            p.is_file().then(|| p.display().to_string())
        })
        .collect();
    files.sort();
    files
}

/// A crash-test child on `dir` running until killed (see
/// [`workload`]), its stdout piped, ready to spawn; with an odd `seed` its
/// compactions commit through table files.
pub fn workload(
    dir: &std::path::Path,
    durability: &str,
    seed: u64,
    threads: u64,
) -> std::process::Command {
    workload::Workload::new(dir, durability, seed, threads).command()
}

/// Runs a prepared `simstore query ... --max-distance 0` command over
/// `fps` and says, for each, whether the store holds it.
pub fn present_by(mut query: std::process::Command, fps: &[u64]) -> Vec<bool> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = query
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = fps.iter().map(|f| format!("{f:016x}\n")).collect();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| !l.ends_with("\"matches\":[]}"))
        .collect()
}

/// The count in one `acked N` line of `simstore add --ack`.
pub fn ack_count(line: std::io::Result<String>) -> usize {
    let line = line.expect("reading the acknowledgements");
    line.trim()
        .strip_prefix("acked ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not an acknowledgement: {line:?}"))
}

/// Reads `acked N` lines to their end: the last count, or `before` when
/// there are none.
pub fn last_ack(lines: impl Iterator<Item = std::io::Result<String>>, before: usize) -> usize {
    lines.map(ack_count).last().unwrap_or(before)
}

/// The key of table `t`'s index record in the default column family.
pub fn index_key(t: u16) -> Vec<u8> {
    let mut key = b"index".to_vec();
    key.extend_from_slice(&t.to_be_bytes());
    key
}
