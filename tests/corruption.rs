//! Byte flips anywhere in a store's files: every flip is either detected
//! (a typed error at open, query or verify) or harmless (every answer still
//! exact). A wrong answer, a panic or a hang fails the test.
//!
//! `SIMSTORE_CORRUPTION_TRIALS=N` sets the number of flips (default 60).

mod common;

use std::path::{Path, PathBuf};

use common::{Model, Rng};
use simstore::{Error, Options, Store};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            // RocksDB's info log and lock file hold no data.
            if !name.starts_with("LOG")
                && name != "LOCK"
                && std::fs::metadata(&p).unwrap().len() > 0
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

enum Outcome {
    Detected,
    Harmless,
}

fn probe(dir: &Path, model: &Model, queries: &[u64]) -> Result<Outcome, String> {
    let store = match Store::open(dir, &Options::new().manual_compaction(true)) {
        Ok(s) => s,
        Err(
            e @ (Error::Corrupt { .. }
            | Error::Storage { .. }
            | Error::NotAStore { .. }
            | Error::UnsupportedVersion { .. }
            | Error::Io { .. }),
        ) => {
            let _ = e.to_string();
            return Ok(Outcome::Detected);
        }
        Err(e) => return Err(format!("unexpected error kind at open: {e:?}")),
    };
    let verify = store
        .verify()
        .map_err(|e| format!("verify failed to run: {e}"))?;
    let mut detected = !verify.ok();
    for &q in queries {
        match store.query(q, 3) {
            Ok(got) => {
                if common::shape(&got) != model.query(q, 3) {
                    if verify.ok() {
                        return Err(format!("wrong answer for {q:016x} with a clean verify"));
                    }
                    return Err(format!(
                        "wrong answer for {q:016x} (verify: {:?})",
                        verify.problems
                    ));
                }
            }
            Err(Error::Corrupt { .. } | Error::Storage { .. }) => detected = true,
            Err(e) => return Err(format!("unexpected error kind at query: {e:?}")),
        }
    }
    // The export gives the model exactly, or a typed error.
    let mut exported = Vec::new();
    match store.export(|fp, ids| {
        exported.push((fp, ids.to_vec()));
        true
    }) {
        Ok(_) => {
            let want: Vec<(u64, Vec<u64>)> = model
                .fps
                .iter()
                .map(|(&f, ids)| (f, ids.iter().copied().collect()))
                .collect();
            if exported != want {
                return Err(format!(
                    "wrong export (verify: {:?}): {} fingerprints against {}",
                    verify.problems,
                    exported.len(),
                    want.len()
                ));
            }
        }
        Err(Error::Corrupt { .. } | Error::Storage { .. }) => detected = true,
        Err(e) => return Err(format!("unexpected error kind at export: {e:?}")),
    }
    Ok(if detected {
        Outcome::Detected
    } else {
        Outcome::Harmless
    })
}

/// A database that lost its `CURRENT` or `MANIFEST` file, a table file or
/// its whole directory cannot be opened, and the error is corruption.
#[test]
fn missing_database_files_are_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let template = tmp.path().join("template");
    {
        let store = Store::create(&template, &Options::new().manual_compaction(true)).unwrap();
        let pairs: Vec<(u64, u64)> = (0..2000u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i))
            .collect();
        store.insert_many(&pairs).unwrap();
        store.compact().unwrap();
    }
    for lost in ["CURRENT", "MANIFEST-", ".sst", "db"] {
        let dir = tmp.path().join(lost);
        copy_dir(&template, &dir);
        let db = dir.join("db");
        if lost == "db" {
            std::fs::remove_dir_all(&db).unwrap();
        } else {
            let named: Vec<PathBuf> = files(&db)
                .into_iter()
                .filter(|f| f.to_str().unwrap().contains(lost))
                .collect();
            assert!(!named.is_empty(), "no {lost} file");
            named.iter().for_each(|f| std::fs::remove_file(f).unwrap());
        }
        match Store::open(&dir, &Options::new()) {
            Err(e) => assert!(e.is_corruption(), "{lost}: {e:?}"),
            Ok(_) => panic!("{lost}: opened"),
        }
    }
}

#[test]
fn byte_flips_are_detected_or_harmless() {
    let trials: usize = std::env::var("SIMSTORE_CORRUPTION_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let tmp = tempfile::tempdir().unwrap();
    let template = tmp.path().join("template");
    let mut rng = Rng(99);
    let mut model = Model::default();
    {
        let store = Store::create(
            &template,
            &Options::new().block_size(128).manual_compaction(true),
        )
        .unwrap();
        let data = common::clustered(4000, &mut rng);
        let pairs: Vec<(u64, u64)> = data
            .iter()
            .enumerate()
            .map(|(i, &f)| (f, i as u64))
            .collect();
        for &(f, i) in &pairs {
            model.insert(f, Some(i));
        }
        store.insert_many(&pairs[..3000]).unwrap();
        store.compact().unwrap();
        store.flush().unwrap();
        store.insert_many(&pairs[3000..]).unwrap();
    }
    let stored: Vec<u64> = model.fps.keys().copied().collect();
    let mut queries = common::queries(&stored, 100, &mut rng);
    queries.extend(stored.iter().step_by(7));
    let all_files = files(&template);
    assert!(
        all_files
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "sst")),
        "no table files: {all_files:?}"
    );
    let (mut detected, mut harmless) = (0, 0);
    let mut failures = Vec::new();
    for trial in 0..trials {
        let dir = tmp.path().join(format!("t{trial}"));
        copy_dir(&template, &dir);
        let targets = files(&dir);
        let file = &targets[rng.below(targets.len() as u64) as usize];
        let mut bytes = std::fs::read(file).unwrap();
        let at = rng.below(bytes.len() as u64) as usize;
        bytes[at] ^= 1 << rng.below(8);
        std::fs::write(file, &bytes).unwrap();
        let name = file.strip_prefix(&dir).unwrap().display().to_string();
        match probe(&dir, &model, &queries) {
            Ok(Outcome::Detected) => detected += 1,
            Ok(Outcome::Harmless) => harmless += 1,
            Err(e) => failures.push(format!("{name} byte {at}: {e}")),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!(
        "corruption: {trials} flips, {detected} detected, {harmless} harmless, {} wrong",
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(detected > 0);
}
