//! The crash-test child. The crash and power-loss tests run their own test
//! binary again as a child process (`workload` builds the command) whose
//! ignored test `workload_child` calls [`child`]: writer threads insert
//! and delete through the library while a compactor thread compacts;
//! every operation is announced before it starts (`try`) and reported
//! after it is acknowledged (`ack`), one line each on stdout, so a parent
//! that kills the process at any moment knows exactly what must have
//! survived. Lines that are none of these (the test harness's own) are
//! ignored by the parents.
//!
//! Lines: `try T insert FP ID`, `ack T insert FP ID`,
//! `try T delete FP`, `ack T delete FP` (the fingerprint and all its ids),
//! `try T remove FP ID`, `ack T remove FP ID` (one id; the fingerprint
//! too when it was its last), `compacted`. Thread `T` only
//! touches fingerprints `fp` with `fp % threads == T`, so each
//! fingerprint's history is one thread's sequence.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use simstore::{Durability, Options, Store};

use super::Rng;

/// The environment variable carrying the child's configuration.
const CONFIG: &str = "SIMSTORE_WORKLOAD_CHILD";

/// What a child runs.
pub struct Workload {
    /// Store directory (must exist).
    pub dir: PathBuf,
    /// `sync` or `buffered`.
    pub durability: String,
    /// Seed of the operation sequence; with an odd seed every compaction
    /// commits through table files.
    pub seed: u64,
    /// Writer threads.
    pub threads: u64,
    /// Operations per writer thread (it runs until killed by default).
    pub ops: u64,
}

impl Workload {
    /// A child on `dir` running until killed.
    pub fn new(dir: &Path, durability: &str, seed: u64, threads: u64) -> Workload {
        Workload {
            dir: dir.to_path_buf(),
            durability: durability.to_string(),
            seed,
            threads,
            ops: u64::MAX,
        }
    }

    /// The command running this workload in a child process of the current
    /// test binary (which must define the ignored test `workload_child`),
    /// its stdout piped, ready to spawn.
    pub fn command(&self) -> Command {
        let mut c = Command::new(std::env::current_exe().expect("the test binary"));
        c.args([
            "workload_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            CONFIG,
            format!(
                "{}\n{}\n{}\n{}\n{}",
                self.dir.display(),
                self.durability,
                self.seed,
                self.threads,
                self.ops
            ),
        )
        .stdout(Stdio::piped());
        c
    }
}

/// The child's body (the ignored test `workload_child`): runs the workload
/// its parent described, until killed or done. Run by hand (no
/// configuration in the environment) it does nothing.
pub fn child() {
    let Ok(config) = std::env::var(CONFIG) else {
        eprintln!("workload_child: run by the crash tests in a child process");
        return;
    };
    let f: Vec<&str> = config.split('\n').collect();
    let [dir, durability, seed, threads, ops] = f[..] else {
        panic!("bad {CONFIG}: {config:?}");
    };
    let durability = match durability {
        "sync" => Durability::Sync,
        _ => Durability::Buffered,
    };
    let seed: u64 = seed.parse().unwrap();
    // End the harness's unfinished `test workload_child ... ` line, so
    // the first announcement starts a line of its own.
    println!();
    let mut options = Options::new().durability(durability);
    // Odd seeds commit every compaction through table files.
    if seed % 2 == 1 {
        options = options.table_file_bytes(0);
    }
    run(
        Path::new(dir),
        options,
        seed,
        threads.parse::<u64>().unwrap().max(1),
        ops.parse().unwrap(),
    )
    .unwrap();
}

/// Runs until killed (or for `ops` operations per thread).
fn run(dir: &Path, options: Options, seed: u64, threads: u64, ops: u64) -> simstore::Result<()> {
    // A small merge threshold, so merges into the smaller levels (and of
    // levels into larger ones) happen between the full compactions.
    let store = Arc::new(Store::open(dir, &options.merge_threshold(50))?);
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = {
        let out = Arc::clone(&out);
        move |line: String| {
            let mut o = out.lock().unwrap();
            let _ = writeln!(o, "{line}");
            let _ = o.flush();
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let compactor = {
        let (store, stop, say) = (Arc::clone(&store), Arc::clone(&stop), say.clone());
        std::thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(15));
                // Mostly the merges due (into one level), now and then a
                // full compaction (every level into level 0).
                round += 1;
                let merged = if round.is_multiple_of(4) {
                    store.compact()
                } else {
                    store.merge_due()
                };
                if merged.is_ok() {
                    say("compacted".into());
                }
            }
        })
    };
    let writers: Vec<_> = (0..threads)
        .map(|t| {
            let (store, say) = (Arc::clone(&store), say.clone());
            std::thread::spawn(move || -> simstore::Result<()> {
                let mut rng = Rng(seed ^ (t << 56) ^ 0x5eed);
                let mut mine: Vec<u64> = Vec::new();
                // The ids this thread gave each of its fingerprints.
                let mut ids: std::collections::HashMap<u64, Vec<u64>> = Default::default();
                for n in 0..ops {
                    let r = rng.next();
                    if r % 8 == 1 && !mine.is_empty() {
                        let fp = mine[(r >> 8) as usize % mine.len()];
                        let held = ids.entry(fp).or_default();
                        if held.is_empty() {
                            continue;
                        }
                        let id = held.swap_remove((r >> 20) as usize % held.len());
                        say(format!("try {t} remove {fp:016x} {id}"));
                        store.delete(fp, id)?;
                        say(format!("ack {t} remove {fp:016x} {id}"));
                        if held.is_empty() {
                            ids.remove(&fp);
                            mine.retain(|&m| m != fp);
                        }
                    } else if r.is_multiple_of(4) && !mine.is_empty() {
                        let fp = mine.swap_remove((r >> 8) as usize % mine.len());
                        ids.remove(&fp);
                        say(format!("try {t} delete {fp:016x}"));
                        store.delete_fingerprint(fp)?;
                        say(format!("ack {t} delete {fp:016x}"));
                    } else {
                        // Near other fingerprints of this thread half the time.
                        let mut fp = if r.is_multiple_of(2) && !mine.is_empty() {
                            mine[(r >> 8) as usize % mine.len()] ^ (1u64 << (r >> 58))
                        } else {
                            rng.next()
                        };
                        let base = fp / threads * threads;
                        fp = base.checked_add(t).unwrap_or(base - threads + t);
                        let id = (t << 48) | n;
                        say(format!("try {t} insert {fp:016x} {id}"));
                        store.insert(fp, id)?;
                        say(format!("ack {t} insert {fp:016x} {id}"));
                        if !mine.contains(&fp) {
                            mine.push(fp);
                        }
                        ids.entry(fp).or_default().push(id);
                    }
                }
                Ok(())
            })
        })
        .collect();
    let mut result = Ok(());
    for w in writers {
        if let Ok(Err(e)) = w.join() {
            result = Err(e);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = compactor.join();
    result
}
