//! Independent per-table work spread over the cores.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f(0), f(1), …, f(n - 1)` in that order, computed by up to `threads`
/// scoped threads that each take the next undone index (so one slow item
/// does not hold up a fixed share). With one thread, or one item, runs on
/// the calling thread. A panic in a worker resumes on the caller.
pub(super) fn map_indexed<R: Send>(
    n: usize,
    threads: usize,
    f: impl Fn(usize) -> R + Sync,
) -> Vec<R> {
    let threads = threads.min(n);
    if threads <= 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return mine;
                        }
                        mine.push((i, f(i)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The cores this process may use (1 when unknown).
pub(super) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Results come back in index order whatever the thread count.
    #[test]
    fn results_in_index_order() {
        for threads in [0, 1, 2, 3, 8] {
            for n in [0, 1, 2, 5, 17] {
                let got = map_indexed(n, threads, |i| i * i);
                let want: Vec<usize> = (0..n).map(|i| i * i).collect();
                assert_eq!(got, want, "threads {threads}, n {n}");
            }
        }
    }
}
