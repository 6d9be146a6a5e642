//! `simstore-bench html`: the one-pass HTML text scanner that sketches
//! read against the parser-based extraction `hash --html` uses: how many
//! documents differ in their words (the first few shown), and the speed
//! of each.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use simstore::simhash::{tokens, visible_text, visible_text_fast};

use simstore_cli::docs::files;
use simstore_cli::Failure;

/// Compares the two extractions over every file of `inputs`.
pub fn run(inputs: &[PathBuf], out: &mut impl Write) -> Result<(), Failure> {
    let (mut docs, mut bytes, mut differ) = (0usize, 0usize, 0usize);
    let (mut parser, mut scanner) = (Duration::ZERO, Duration::ZERO);
    for file in files(inputs).into_iter().flatten() {
        let Ok(html) = std::fs::read_to_string(&file) else {
            continue;
        };
        docs += 1;
        bytes += html.len();
        let started = Instant::now();
        let parsed = visible_text(&html);
        parser += started.elapsed();
        let started = Instant::now();
        let scanned = visible_text_fast(&html);
        scanner += started.elapsed();
        let (a, b): (Vec<String>, Vec<String>) =
            (tokens(&parsed).collect(), tokens(&scanned).collect());
        if a != b {
            differ += 1;
            if differ <= 5 {
                let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                let around =
                    |w: &[String]| w[at.saturating_sub(3)..(at + 3).min(w.len())].join(" ");
                writeln!(
                    out,
                    "{}: {} words parsed, {} scanned; first difference at word {at}: parsed `{}`, scanned `{}`",
                    file.display(),
                    a.len(),
                    b.len(),
                    around(&a),
                    around(&b)
                )?;
            }
        }
    }
    let rate = |t: Duration| docs as f64 / t.as_secs_f64().max(1e-9);
    writeln!(
        out,
        "{docs} documents ({} KB on average): {differ} differ in their words; parser {:.0} documents/s, scanner {:.0} documents/s (one thread)",
        bytes / docs.max(1) / 1024,
        rate(parser),
        rate(scanner)
    )?;
    Ok(())
}
