//! The commands that open a store: one function each, called with their
//! parsed arguments.

use std::io::{self, Write};
use std::path::Path;

use simstore::{Durability, Error, Op, Options, Store, VerifyReport};

use super::args::OpenArgs;
use super::json;
use super::stream::{self, Batcher, Failure};

/// What a command does with the store it opens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// Writes and exits (`add`, `delete`): the background compactor runs;
    /// the tables stay on disk unless `--memory-budget` says otherwise.
    Write,
    /// Merges, or reads everything once, and exits (`compact`, `dump`):
    /// no background compactor; tables on disk unless `--memory-budget`
    /// says otherwise.
    Compact,
    /// Answers queries or reports (`query`, `stats`, `verify`): no
    /// background compactor (a query never starts a merge it would then
    /// wait for at exit); the default memory budget.
    Read,
}

/// Opens the store in `dir` for `purpose`.
///
/// Commands that write or compact and exit answer no query, so unless
/// `--memory-budget` says otherwise they keep the tables on disk: nothing
/// is read into memory behind the open, and a merge writes its new blocks
/// without also holding them. Building a 100M store with `add` peaked at
/// 13.7 GB this way, against 22.2 GB with the tables held.
fn open(
    dir: &Path,
    durability: Durability,
    purpose: Purpose,
    args: &OpenArgs,
) -> Result<Store, Failure> {
    let mut options = Options::new()
        .trim_allocator(true)
        .durability(durability)
        .manual_compaction(purpose != Purpose::Write);
    match args.memory_budget {
        Some(bytes) => options = options.memory_budget(bytes),
        None if purpose != Purpose::Read => options = options.memory_budget(0),
        None => {}
    }
    if let Some(n) = args.merge_threshold {
        options = options.merge_threshold(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(Store::open(dir, &options)?)
}

/// `create`: prints the new store's stats.
pub fn create(dir: &Path, options: &Options) -> Result<(), Failure> {
    let store = Store::create(dir, options)?;
    writeln!(io::stdout().lock(), "{}", json::stats(&store.stats()))?;
    Ok(())
}

/// `add`: inserts the `FP [ID]` lines of standard input.
pub fn add(dir: &Path, durability: Durability, ack: bool, args: &OpenArgs) -> Result<(), Failure> {
    let store = open(dir, durability, Purpose::Write, args)?;
    if dir.join(super::dedup::LOG_NAME).exists() {
        // Adding still works (scripts rely on its exit codes), but `dedup`
        // reads the store's ids as its own decision numbers.
        eprintln!(
            "simstore: warning: {} is kept by dedup ({}): its ids are dedup's decision \
             numbers, and dedup will name documents added here wrongly",
            dir.display(),
            super::dedup::LOG_NAME
        );
    }
    let mut out = io::stdout().lock();
    Batcher::new(&store, ack).run(io::stdin(), &mut out, |fp, id| {
        Ok(Op::Insert {
            fingerprint: fp,
            id,
        })
    })
}

/// `delete`: removes the pairs (`FP ID`) and fingerprints (`FP`) of
/// standard input, then says on stderr what went.
pub fn delete(
    dir: &Path,
    durability: Durability,
    ack: bool,
    args: &OpenArgs,
) -> Result<(), Failure> {
    let store = open(dir, durability, Purpose::Write, args)?;
    let before = store.stats();
    let mut out = io::stdout().lock();
    let mut batcher = Batcher::new(&store, ack);
    let result = batcher.run(io::stdin(), &mut out, |fp, id| {
        Ok(match id {
            Some(id) => Op::Delete {
                fingerprint: fp,
                id,
            },
            None => Op::DeleteFingerprint { fingerprint: fp },
        })
    });
    // What was removed, also when a malformed line ended the run (the
    // lines before it were applied).
    let after = store.stats();
    eprintln!(
        "simstore: delete: removed {} pair(s) and {} fingerprint(s); \
         {} line(s) named nothing stored",
        before.ids.saturating_sub(after.ids),
        before.fingerprints.saturating_sub(after.fingerprints),
        batcher.unchanged()
    );
    result
}

/// How `query` answers.
pub struct QueryMode {
    /// Distance to search (default: the store's maximum).
    pub max_distance: Option<u32>,
    /// At most one match per query.
    pub first: bool,
    /// Read all input first and answer it as one batch.
    pub batch: bool,
    /// The most ids printed a match, if limited.
    pub max_ids: Option<usize>,
    /// Answer before every block is in memory.
    pub lazy: bool,
    /// Probabilistic queries (`FP [VOLATILITY]` lines) within this budget.
    pub probabilistic: Option<simstore::Budget>,
}

/// `query`: answers the `FP` lines of standard input, one JSON line each.
pub fn query(dir: &Path, mode: &QueryMode, args: &OpenArgs) -> Result<(), Failure> {
    let store = open(dir, Durability::Buffered, Purpose::Read, args)?;
    if !mode.lazy {
        store.wait_warm();
    }
    let supported = store.max_distance();
    let k = mode.max_distance.unwrap_or(supported);
    if k > supported {
        return Err(Error::DistanceTooLarge {
            asked: k,
            supported,
        }
        .into());
    }
    // Buffered: one write per run of answers, flushed whenever the next
    // input line is not already there.
    let mut out = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
    if let Some(budget) = mode.probabilistic {
        return stream::query_probabilistic(
            &store,
            io::stdin(),
            &mut out,
            k,
            mode.first,
            budget,
            mode.max_ids,
        );
    }
    stream::query(
        &store,
        io::stdin(),
        &mut out,
        k,
        mode.first,
        mode.batch,
        mode.max_ids,
    )
}

/// `compact`: merges everything pending, gives replaced blocks' space
/// back, prints what it did.
pub fn compact(dir: &Path, args: &OpenArgs) -> Result<(), Failure> {
    let store = open(dir, Durability::Sync, Purpose::Compact, args)?;
    let r = store.compact()?;
    store.reclaim_space()?;
    writeln!(
        io::stdout().lock(),
        "{{\"merged\":{},\"removed\":{},\"blocks_replaced\":{},\"blocks_written\":{}}}",
        r.merged,
        r.removed,
        r.blocks_replaced,
        r.blocks_written
    )?;
    Ok(())
}

/// `stats`: prints counts and sizes.
pub fn stats(dir: &Path, args: &OpenArgs) -> Result<(), Failure> {
    let store = open(dir, Durability::Sync, Purpose::Read, args)?;
    writeln!(io::stdout().lock(), "{}", json::stats(&store.stats()))?;
    Ok(())
}

/// `dump`: prints every stored pair as `add` reads it, in increasing
/// order. Opened as `compact` is (no background merges, tables read from
/// disk unless `--memory-budget` says otherwise): each block is read once.
pub fn dump(dir: &Path, args: &OpenArgs) -> Result<(), Failure> {
    let store = open(dir, Durability::Sync, Purpose::Compact, args)?;
    let mut out = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut failed = None;
    store.export(|fp, ids| {
        let written = if ids.is_empty() {
            writeln!(out, "{fp:016x}")
        } else {
            ids.iter()
                .try_for_each(|id| writeln!(out, "{fp:016x} {id}"))
        };
        failed = written.err();
        failed.is_none()
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    out.flush()?;
    Ok(())
}

/// `verify`: checks everything; fails with [`Failure::Verify`] on any
/// problem, corruption found by the open included.
pub fn verify(dir: &Path, args: &OpenArgs) -> Result<(), Failure> {
    let report = match open(dir, Durability::Sync, Purpose::Read, args) {
        Ok(store) => store.verify()?,
        Err(Failure::Store(e)) if e.is_corruption() => {
            let mut report = VerifyReport::default();
            report.problems.push(e.to_string());
            writeln!(io::stdout().lock(), "{}", json::verify(&report))?;
            return Err(Failure::Verify);
        }
        Err(e) => return Err(e),
    };
    writeln!(io::stdout().lock(), "{}", json::verify(&report))?;
    if !report.ok() {
        for p in &report.problems {
            eprintln!("simstore: verify: {p}");
        }
        return Err(Failure::Verify);
    }
    Ok(())
}
