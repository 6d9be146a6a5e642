//! `simstore-bench quality`: how well fingerprint distance finds near-duplicate
//! pairs of real documents, against the exact Jaccard similarity of their
//! word shingles, for several shingle widths and distances.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use simstore::simhash::{feature_hash, Fingerprinter};

use simstore_cli::docs::{files, Source};
use simstore_cli::Failure;

/// Options of one quality run.
pub struct Quality {
    /// Pairs with Jaccard similarity at least this are near-duplicates.
    pub threshold: f64,
    /// Word-shingle width of the Jaccard ground truth.
    pub truth_shingle: usize,
    /// Simhash word-shingle widths to compare.
    pub shingles: Vec<usize>,
    /// Largest distance reported.
    pub max_k: u32,
}

impl Quality {
    /// Reads the documents, prints a markdown table of precision and recall.
    pub fn run(
        &self,
        inputs: &[PathBuf],
        source: &Source,
        out: &mut impl Write,
    ) -> Result<(), Failure> {
        let mut texts: Vec<(String, String)> = Vec::new();
        for file in files(inputs).into_iter().flatten() {
            source.documents(&file, &mut |d| {
                if let Ok(t) = d.text {
                    texts.push((d.name, t));
                }
            });
        }
        let truth_fp = Fingerprinter::new().shingle(self.truth_shingle);
        let sets: Vec<HashSet<u64>> = texts
            .iter()
            .map(|(_, t)| {
                truth_fp
                    .features(t)
                    .iter()
                    .map(|(f, _)| feature_hash(f))
                    .collect()
            })
            .collect();
        let keep: Vec<usize> = (0..texts.len()).filter(|&i| !sets[i].is_empty()).collect();
        let mut truth = HashSet::new();
        for (a, &i) in keep.iter().enumerate() {
            for &j in &keep[a + 1..] {
                let inter = sets[i].intersection(&sets[j]).count();
                let union = sets[i].len() + sets[j].len() - inter;
                if inter as f64 >= self.threshold * union as f64 {
                    truth.insert((i, j));
                }
            }
        }
        let pairs = keep.len() * keep.len().saturating_sub(1) / 2;
        writeln!(
            out,
            "{} documents, {pairs} pairs, {} near-duplicate pairs (Jaccard of word {}-shingles >= {})\n",
            keep.len(),
            truth.len(),
            self.truth_shingle,
            self.threshold
        )?;
        writeln!(
            out,
            "| shingle | k | pairs found | true | precision | recall |"
        )?;
        writeln!(out, "|---|---|---|---|---|---|")?;
        for &w in &self.shingles {
            let fp = Fingerprinter::new().shingle(w);
            let fps: Vec<u64> = keep
                .iter()
                .map(|&i| fp.fingerprint(&texts[i].1).map_or(0, |s| s.fingerprint))
                .collect();
            for k in 1..=self.max_k {
                let (mut found, mut hit) = (0usize, 0usize);
                for a in 0..keep.len() {
                    for b in a + 1..keep.len() {
                        if (fps[a] ^ fps[b]).count_ones() <= k {
                            found += 1;
                            hit += usize::from(truth.contains(&(keep[a], keep[b])));
                        }
                    }
                }
                let precision = if found == 0 {
                    1.0
                } else {
                    hit as f64 / found as f64
                };
                let recall = if truth.is_empty() {
                    1.0
                } else {
                    hit as f64 / truth.len() as f64
                };
                writeln!(
                    out,
                    "| {w} | {k} | {found} | {hit} | {precision:.3} | {recall:.3} |"
                )?;
            }
        }
        Ok(())
    }
}
