//! Fingerprint test vectors (also in storage-format.md, cross-checked with
//! the independent python-xxhash implementation), and near-duplicate
//! behaviour on real text: the license texts every Debian system ships in
//! /usr/share/common-licenses (base-files), which include several versions
//! of the same licenses.

mod common;

use std::collections::HashSet;

use simstore::simhash::{feature_hash, Fingerprinter, FEATURE_SEED};

const FOX: &str = "The quick brown fox jumps over the lazy dog.";

#[test]
fn feature_hash_vectors() {
    assert_eq!(FEATURE_SEED, 0x7369_6d68_6173_6831);
    assert_eq!(feature_hash("hello"), 0x2107_cf7a_e1ab_c56d);
    assert_eq!(feature_hash("the quick brown"), 0xc47c_e9c3_b4e5_4017);
    assert_eq!(feature_hash("σίσυφος"), 0xc227_8786_d4f5_fd9e);
}

#[test]
fn fingerprint_vectors() {
    let fp = |f: Fingerprinter, t: &str| f.fingerprint(t).unwrap().fingerprint;
    assert_eq!(fp(Fingerprinter::new(), FOX), 0xd078_e840_3aa2_aa98);
    assert_eq!(
        fp(Fingerprinter::new().shingle(1), FOX),
        0x1f81_092b_f898_98a2
    );
    assert_eq!(
        fp(Fingerprinter::new().char_shingle(Some(4)), FOX),
        0x43ba_21b9_016e_491f
    );
    assert_eq!(
        fp(Fingerprinter::new().stop_words(true), FOX),
        0x733a_8005_3932_bab9
    );
    assert_eq!(
        fp(
            Fingerprinter::new().shingle(2),
            "Straße, ÉCOLE — naïve Σίσυφος 42"
        ),
        0x300a_0688_3602_cb01
    );
    // Case, punctuation and spacing do not matter.
    assert_eq!(
        fp(
            Fingerprinter::new(),
            "the QUICK   brown fox -- jumps over the lazy dog"
        ),
        0xd078_e840_3aa2_aa98
    );
}

fn shingles(text: &str) -> HashSet<String> {
    Fingerprinter::new()
        .features(text)
        .into_iter()
        .map(|(s, _)| s)
        .collect()
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    a.intersection(b).count() as f64 / a.union(b).count().max(1) as f64
}

#[test]
fn near_duplicate_real_texts_are_closer_than_unrelated_ones() {
    let dir = std::path::Path::new("/usr/share/common-licenses");
    let mut docs: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("/usr/share/common-licenses (Debian base-files) is needed for this test")
        .filter_map(|e| {
            let p = e.ok()?.path();
            Some((
                p.file_name()?.to_string_lossy().to_string(),
                std::fs::read_to_string(&p).ok()?,
            ))
        })
        .collect();
    docs.sort();
    assert!(docs.len() >= 10, "too few license texts: {}", docs.len());
    let fps: Vec<(u64, HashSet<String>)> = docs
        .iter()
        .map(|(_, t)| {
            (
                Fingerprinter::new().fingerprint(t).unwrap().fingerprint,
                shingles(t),
            )
        })
        .collect();
    let mut near = Vec::new();
    let mut far = Vec::new();
    for i in 0..fps.len() {
        for j in i + 1..fps.len() {
            let d = (fps[i].0 ^ fps[j].0).count_ones();
            let sim = jaccard(&fps[i].1, &fps[j].1);
            if sim >= 0.5 {
                near.push((d, &docs[i].0, &docs[j].0, sim));
            } else if sim < 0.2 {
                far.push(d);
            }
        }
    }
    assert!(
        near.len() >= 2,
        "expected version pairs among {:?}",
        docs.iter().map(|d| &d.0).collect::<Vec<_>>()
    );
    assert!(far.len() >= 20);
    let closest_far = *far.iter().min().unwrap();
    for (d, a, b, sim) in &near {
        assert!(
            *d < closest_far,
            "{a} vs {b} (Jaccard {sim:.2}) at distance {d}, an unrelated pair at {closest_far}"
        );
    }
    let mean_far = far.iter().map(|&d| f64::from(d)).sum::<f64>() / far.len() as f64;
    assert!(
        mean_far > 16.0,
        "unrelated texts average only {mean_far:.1} bits apart"
    );
}
