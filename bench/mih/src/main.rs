//! `simstore-peer-mih STORED QUERIES K`: builds a mih-rs index over the
//! fingerprints in STORED (one 16-digit hex value a line), answers every
//! line of QUERIES with a range search of radius K, one thread, and prints
//! the build time, the query rate and each query's match count (so the
//! caller can check them against simstore's and brute force).

use std::io::Write;
use std::time::Instant;

fn read(path: &str) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(|l| u64::from_str_radix(l.trim().trim_start_matches("0x"), 16).expect("hex line"))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, stored, queries, k] = &args[..] else {
        eprintln!("usage: simstore-peer-mih STORED QUERIES K");
        std::process::exit(2);
    };
    let k: usize = k.parse().expect("K");
    let stored = read(stored);
    let queries = read(queries);
    let started = Instant::now();
    let index = mih_rs::Index::new(stored).expect("mih-rs index");
    let built = started.elapsed();
    let mut searcher = index.range_searcher();
    let mut counts = Vec::with_capacity(queries.len());
    let started = Instant::now();
    for &q in &queries {
        counts.push(searcher.run(q, k).len());
    }
    let took = started.elapsed();
    let out = std::io::stdout();
    let mut out = out.lock();
    writeln!(
        out,
        "mih-rs: build {:.2} s; {:.0} queries/s",
        built.as_secs_f64(),
        queries.len() as f64 / took.as_secs_f64()
    )
    .unwrap();
    for c in counts {
        writeln!(out, "{c}").unwrap();
    }
}
