//! `simstore-bench quality`: how well fingerprint distance finds
//! near-duplicate documents, against the exact Jaccard similarity of their
//! word shingles as the truth, at several similarity thresholds: over
//! pairs (every pair within distance k, for several shingle widths), and
//! over the decisions `simstore dedup` makes in input order (each
//! document a near-duplicate of the nearest earlier new one within k, or
//! new). Also the fingerprinting rate.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use simstore::simhash::{feature_hash, Fingerprinter, DEFAULT_SHINGLE};

use simstore_cli::docs::{files, Source};
use simstore_cli::Failure;

use simstore::simhash::Sketch;

/// How a document is matched to an earlier one.
#[derive(Clone, Copy)]
enum Recheck {
    /// `simstore dedup`: the nearest candidate by simhash distance.
    None,
    /// The nearest candidate whose exact Jaccard similarity reaches the
    /// threshold (the ceiling any re-check of simhash candidates reaches).
    Exact,
    /// `simstore dedup --similarity`: sketch fingerprints, candidates whose
    /// sketches pass [`Sketch::recheck`], the most similar taken,
    /// every document kept.
    Similarity,
}

/// Options of one quality run.
pub struct Quality {
    /// Pairs with Jaccard similarity at least one of these are
    /// near-duplicates (a table each).
    pub thresholds: Vec<f64>,
    /// Word-shingle width of the Jaccard ground truth.
    pub truth_shingle: usize,
    /// Simhash word-shingle widths to compare.
    pub shingles: Vec<usize>,
    /// Largest distance reported.
    pub max_k: u32,
    /// Weight features by term frequency times inverse document
    /// frequency over these documents (a feature common to most of them,
    /// like a template's, then weighs little) instead of term frequency.
    pub idf: bool,
}

/// The truth: the Jaccard similarity of every pair of documents at least
/// the smallest threshold, by index pair `(i, j)` with `i < j`.
struct Truth {
    similar: HashMap<(usize, usize), f64>,
}

impl Truth {
    fn new(sets: &[HashSet<u64>], least: f64) -> Self {
        let mut similar = HashMap::new();
        for i in 0..sets.len() {
            for j in i + 1..sets.len() {
                let s = jaccard(&sets[i], &sets[j]);
                if s >= least {
                    similar.insert((i, j), s);
                }
            }
        }
        Self { similar }
    }

    /// Whether documents `a` and `b` are near-duplicates at `threshold`.
    fn near(&self, a: usize, b: usize, threshold: f64) -> bool {
        let key = (a.min(b), a.max(b));
        self.similar.get(&key).is_some_and(|&s| s >= threshold)
    }

    /// Pairs that are near-duplicates at `threshold`.
    fn count(&self, threshold: f64) -> usize {
        self.similar.values().filter(|&&s| s >= threshold).count()
    }

    /// Documents with an earlier near-duplicate at `threshold`.
    fn with_earlier(&self, threshold: f64) -> HashSet<usize> {
        self.similar
            .iter()
            .filter(|(_, &s)| s >= threshold)
            .map(|(&(_, j), _)| j)
            .collect()
    }
}

fn jaccard(a: &HashSet<u64>, b: &HashSet<u64>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count();
    inter as f64 / (a.len() + b.len() - inter) as f64
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}

/// `simstore dedup`'s decisions in input order at distance `k`, a
/// candidate counting only when `accept(document, candidate, candidates
/// within k)`: for each
/// document, the accepted earlier kept document with the smallest
/// `rank(document, candidate, distance)` (then the earliest), or `None`.
/// A flagged document is kept too when `keep_all` (as `dedup
/// --similarity` does), else only new ones are.
fn decisions(
    fps: &[u64],
    k: u32,
    keep_all: bool,
    accept: impl Fn(usize, usize, usize) -> bool,
    rank: impl Fn(usize, usize, u32) -> i64,
) -> Vec<Option<usize>> {
    let mut kept: Vec<usize> = Vec::new();
    fps.iter()
        .enumerate()
        .map(|(i, &fp)| {
            let within: Vec<(u32, usize)> = kept
                .iter()
                .map(|&j| ((fps[j] ^ fp).count_ones(), j))
                .filter(|&(d, _)| d <= k)
                .collect();
            let nearest = within
                .iter()
                .filter(|&&(_, j)| accept(i, j, within.len()))
                .map(|&(d, j)| (rank(i, j, d), j))
                .min();
            if nearest.is_none() || keep_all {
                kept.push(i);
            }
            nearest.map(|(_, j)| j)
        })
        .collect()
}

/// Fingerprints with features weighted by term frequency times
/// `ln((n + 1) / (df + 1))`, `df` the number of `texts` holding the
/// feature (learned from the texts themselves, in one pass before).
fn idf_fingerprints(fingerprinter: &Fingerprinter, texts: &[&str]) -> Vec<u64> {
    let features: Vec<Vec<(String, u64)>> =
        texts.iter().map(|t| fingerprinter.features(t)).collect();
    let mut df: HashMap<&str, u32> = HashMap::new();
    for doc in &features {
        for (f, _) in doc {
            *df.entry(f.as_str()).or_default() += 1;
        }
    }
    let n = texts.len() as f64;
    features
        .iter()
        .map(|doc| {
            let weighted = doc.iter().map(|(f, tf)| {
                let idf = ((n + 1.0) / (f64::from(df[f.as_str()]) + 1.0)).ln();
                (f.as_str(), *tf as f64 * idf)
            });
            fingerprinter
                .fingerprint_weighted(weighted)
                .map_or(0, |s| s.fingerprint)
        })
        .collect()
}

impl Quality {
    /// Reads the documents, prints markdown tables of precision and recall.
    pub fn run(
        &self,
        inputs: &[PathBuf],
        source: &Source,
        out: &mut impl Write,
    ) -> Result<(), Failure> {
        let mut docs = Vec::new();
        for file in files(inputs).into_iter().flatten() {
            source.documents(&file, &mut |d| docs.push(d));
        }
        let docs: Vec<_> = docs.into_iter().filter(|d| d.text().is_ok()).collect();
        let texts: Vec<String> = docs
            .iter()
            .map(|d| d.text().expect("checked").into_owned())
            .collect();
        let truth_fp = Fingerprinter::new().shingle(self.truth_shingle);
        let sets: Vec<HashSet<u64>> = texts
            .iter()
            .map(|t| {
                truth_fp
                    .features(t)
                    .iter()
                    .map(|(f, _)| feature_hash(f))
                    .collect()
            })
            .collect();
        let keep: Vec<usize> = (0..texts.len()).filter(|&i| !sets[i].is_empty()).collect();
        let texts: Vec<&str> = keep.iter().map(|&i| texts[i].as_str()).collect();
        let sets: Vec<HashSet<u64>> = keep.iter().map(|&i| sets[i].clone()).collect();
        let least = self
            .thresholds
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let truth = Truth::new(&sets, least);
        // As `dedup --similarity` computes them: HTML read by the scanner.
        let started = Instant::now();
        let fingerprinter = Fingerprinter::new();
        let sketches: Vec<Sketch> = keep
            .iter()
            .map(|&i| {
                let text = docs[i].scanned_text().expect("readable");
                fingerprinter
                    .sketch(&text)
                    .unwrap_or_else(|| Sketch::of_hashes([0]).expect("one hash"))
            })
            .collect();
        let sketch_rate = sets.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
        let bytes: usize = texts.iter().map(|t| t.len()).sum();
        writeln!(
            out,
            "{} documents ({} KB of text on average), {} pairs; truth: Jaccard of word {}-shingles\n",
            texts.len(),
            bytes / texts.len().max(1) / 1024,
            texts.len() * texts.len().saturating_sub(1) / 2,
            self.truth_shingle,
        )?;
        for &w in &self.shingles {
            let fingerprinter = Fingerprinter::new().shingle(w);
            let started = Instant::now();
            let fps: Vec<u64> = if self.idf {
                idf_fingerprints(&fingerprinter, &texts)
            } else {
                texts
                    .iter()
                    .map(|t| fingerprinter.fingerprint(t).map_or(0, |s| s.fingerprint))
                    .collect()
            };
            let rate = texts.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
            writeln!(
                out,
                "word {w}-shingles: {rate:.0} documents/s fingerprinted (text already extracted, one thread)\n"
            )?;
            self.pairs(&truth, &fps, w, out)?;
            if w == DEFAULT_SHINGLE {
                for recheck in [Recheck::None, Recheck::Exact] {
                    self.decisions(&truth, &fps, &sketches, recheck, out)?;
                }
                let minhash: Vec<u64> = sketches.iter().map(Sketch::fingerprint).collect();
                self.decisions(&truth, &minhash, &sketches, Recheck::Similarity, out)?;
                writeln!(
                    out,
                    "sketches as dedup --similarity computes them (HTML scanned, word 3-shingles): {sketch_rate:.0} documents/s, one thread, from the documents' bytes\n"
                )?;
            }
        }
        Ok(())
    }

    /// Pairs within distance k against the truth at each threshold.
    fn pairs(
        &self,
        truth: &Truth,
        fps: &[u64],
        w: usize,
        out: &mut impl Write,
    ) -> Result<(), Failure> {
        writeln!(
            out,
            "| shingle | k | threshold | pairs found | true | near-duplicate pairs | precision | recall |"
        )?;
        writeln!(out, "|---|---|---|---|---|---|---|---|")?;
        let mut within: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.max_k as usize + 1];
        for a in 0..fps.len() {
            for b in a + 1..fps.len() {
                let d = (fps[a] ^ fps[b]).count_ones();
                if d <= self.max_k {
                    within[d as usize].push((a, b));
                }
            }
        }
        for &t in &self.thresholds {
            let relevant = truth.count(t);
            let (mut found, mut hit) = (0usize, 0usize);
            for (k, pairs) in within.iter().enumerate() {
                found += pairs.len();
                hit += pairs.iter().filter(|&&(a, b)| truth.near(a, b, t)).count();
                if k == 0 {
                    continue;
                }
                writeln!(
                    out,
                    "| {w} | {k} | {t} | {found} | {hit} | {relevant} | {:.3} | {:.3} |",
                    ratio(hit, found),
                    ratio(hit, relevant)
                )?;
            }
        }
        writeln!(out)?;
        Ok(())
    }

    /// `simstore dedup`'s decisions in input order against the truth:
    /// precision over the documents flagged (their match is a
    /// near-duplicate), recall over the documents with an earlier
    /// near-duplicate (they are flagged).
    fn decisions(
        &self,
        truth: &Truth,
        fps: &[u64],
        sketches: &[Sketch],
        recheck: Recheck,
        out: &mut impl Write,
    ) -> Result<(), Failure> {
        let name = match recheck {
            Recheck::None => "dedup decisions",
            Recheck::Exact => "with an exact re-check",
            Recheck::Similarity => "dedup --similarity (threshold = truth's)",
        };
        writeln!(
            out,
            "| {name}: k | threshold | flagged | flagged rightly | with an earlier near-duplicate | precision | recall |"
        )?;
        writeln!(out, "|---|---|---|---|---|---|---|")?;
        let relevant: Vec<HashSet<usize>> = self
            .thresholds
            .iter()
            .map(|&t| truth.with_earlier(t))
            .collect();
        for k in 1..=self.max_k {
            for (&t, relevant) in self.thresholds.iter().zip(&relevant) {
                let decided = match recheck {
                    Recheck::None => decisions(fps, k, false, |_, _, _| true, |_, _, d| d.into()),
                    Recheck::Exact => decisions(
                        fps,
                        k,
                        false,
                        |i, j, _| truth.near(i, j, t),
                        |_, _, d| d.into(),
                    ),
                    Recheck::Similarity => decisions(
                        fps,
                        k,
                        true,
                        |i, j, c| sketches[i].recheck(&sketches[j], t, c).is_some(),
                        |i, j, _| -((sketches[i].similarity(&sketches[j]) * 1e9) as i64),
                    ),
                };
                let flagged: Vec<(usize, usize)> = decided
                    .iter()
                    .enumerate()
                    .filter_map(|(i, m)| m.map(|j| (i, j)))
                    .collect();
                let right = flagged
                    .iter()
                    .filter(|&&(i, j)| truth.near(i, j, t))
                    .count();
                let caught = flagged.iter().filter(|(i, _)| relevant.contains(i)).count();
                let chosen = match recheck {
                    Recheck::Similarity if k == Sketch::distance_for(t, self.max_k.min(8)) => {
                        " (the distance --similarity chooses)"
                    }
                    _ => "",
                };
                writeln!(
                    out,
                    "| {k}{chosen} | {t} | {} | {right} | {} | {:.3} | {:.3} |",
                    flagged.len(),
                    relevant.len(),
                    ratio(right, flagged.len()),
                    ratio(caught, relevant.len())
                )?;
            }
        }
        writeln!(out)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decisions as `simstore dedup` makes them: the nearest, then
    /// earliest, earlier document kept as new; a flagged one is not kept.
    #[test]
    fn decisions_follow_dedup() {
        let fps = [0b0000, 0b0001, 0b0011, 0b1111_0000, 0b0111, 0b1111_0001];
        assert_eq!(
            decisions(&fps, 1, false, |_, _, _| true, |_, _, d| d.into()),
            vec![None, Some(0), None, None, Some(2), Some(3)]
        );
        // Equally near: the earliest.
        assert_eq!(
            decisions(
                &[0b01, 0b10, 0b00],
                1,
                false,
                |_, _, _| true,
                |_, _, d| d.into()
            )[2],
            Some(0)
        );
        // Every document kept: 4 (0b0111) may match 2 (0b0011, flagged).
        let all = decisions(&fps, 1, true, |_, _, _| true, |_, _, d| d.into());
        assert_eq!(all, vec![None, Some(0), Some(1), None, Some(2), Some(3)]);
    }

    #[test]
    fn jaccard_and_truth() {
        let set = |v: &[u64]| v.iter().copied().collect::<HashSet<u64>>();
        let sets = vec![set(&[1, 2, 3, 4]), set(&[1, 2, 3, 5]), set(&[9])];
        assert!((jaccard(&sets[0], &sets[1]) - 0.6).abs() < 1e-12);
        let truth = Truth::new(&sets, 0.5);
        assert!(truth.near(1, 0, 0.6) && !truth.near(0, 1, 0.61) && !truth.near(0, 2, 0.5));
        assert_eq!(truth.count(0.5), 1);
        assert_eq!(truth.with_earlier(0.5), HashSet::from([1]));
    }
}
