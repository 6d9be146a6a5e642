//! Work spread over the cores: independent items taken one at a time
//! ([`map_indexed`]), consecutive shares of a slice, one thread each
//! ([`map_shares`], [`map_shares_mut`]), or shares picked item by item by
//! a hash ([`map_scattered`]). Every helper runs on the calling
//! thread when given one thread, returns results in order, and resumes a
//! worker's panic on the caller.

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

/// The length of each of up to `threads` consecutive shares of `len`
/// items (equal but for the last), as [`map_shares`] cuts them.
pub(super) fn share_len(len: usize, threads: usize) -> usize {
    len.div_ceil(threads.max(1)).max(1)
}

/// `f` of each of up to `threads` consecutive shares of `items` (equal
/// but for the last, see [`share_len`]), one scoped thread each, in order.
pub(super) fn map_shares<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 {
        return vec![f(items)];
    }
    let per = share_len(items.len(), threads);
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(per)
            .map(|share| scope.spawn(move || f(share)))
            .collect();
        join(workers)
    })
}

/// [`map_shares`] over shares `f` may change.
pub(super) fn map_shares_mut<T: Send, R: Send>(
    items: &mut [T],
    threads: usize,
    f: impl Fn(&mut [T]) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 {
        return vec![f(items)];
    }
    let per = share_len(items.len(), threads);
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks_mut(per)
            .map(|share| scope.spawn(move || f(share)))
            .collect();
        join(workers)
    })
}

/// Threads a batch of queries is spread over: `threads` for a batch of
/// [`SPREAD_MIN`] or more, one (the calling thread) for a smaller one.
pub(super) fn threads_for(len: usize, threads: usize) -> usize {
    if len >= SPREAD_MIN {
        threads.max(1)
    } else {
        1
    }
}

/// Batches of queries smaller than this are answered on the calling
/// thread: starting threads would cost more than it saves
/// (`tests/oracle.rs` spreads batches over threads with 5,000 queries).
const SPREAD_MIN: usize = 4096;

/// `f` of up to `threads` shares of `items`, one scoped thread each, each
/// item's share picked by a hash of `key(item)` so that costly items
/// (queries with matches) spread evenly however the items are ordered.
/// `f` gives one result an item of its share, in order; the results come
/// back in the order of `items`. The first share to fail (in share
/// order) gives the error. With one thread, `f(items)` on the calling
/// thread.
pub(super) fn map_scattered<T: Clone + Send + Sync, R: Send, E: Send>(
    items: &[T],
    threads: usize,
    key: impl Fn(&T) -> u64,
    f: impl Fn(&[T]) -> Result<Vec<R>, E> + Sync,
) -> Result<Vec<R>, E> {
    if threads <= 1 {
        return f(items);
    }
    let share_of =
        |item: &T| ((key(item).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize) % threads;
    let mut shares = vec![Vec::with_capacity(items.len() / threads + 1); threads];
    for item in items {
        shares[share_of(item)].push(item.clone());
    }
    let mut parts = Vec::with_capacity(threads);
    for part in map_indexed(threads, threads, |t| f(&shares[t])) {
        parts.push(part?.into_iter());
    }
    Ok(items
        .iter()
        .map(|item| {
            parts[share_of(item)]
                .next()
                .unwrap_or_else(|| unreachable!("a share gives a result an item"))
        })
        .collect())
}

/// Joins scoped threads in order, resuming a panic on the caller.
fn join<R>(workers: Vec<std::thread::ScopedJoinHandle<'_, R>>) -> Vec<R> {
    workers
        .into_iter()
        .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        .collect()
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
                let items: Vec<usize> = (0..n).collect();
                let shares = map_shares(&items, threads, <[usize]>::to_vec);
                assert!(shares.len() <= threads.max(1), "threads {threads}, n {n}");
                assert_eq!(shares.concat(), items, "threads {threads}, n {n}");
                let mut doubled = items.clone();
                map_shares_mut(&mut doubled, threads, |share| {
                    share.iter_mut().for_each(|v| *v *= 2)
                });
                let want: Vec<usize> = items.iter().map(|v| v * 2).collect();
                assert_eq!(doubled, want, "threads {threads}, n {n}");
                let squares = map_scattered(
                    &items,
                    threads,
                    |&i| i as u64,
                    |share| Ok::<_, ()>(share.iter().map(|i| i * i).collect()),
                );
                let want: Vec<usize> = items.iter().map(|i| i * i).collect();
                assert_eq!(squares, Ok(want), "threads {threads}, n {n}");
                let failed = map_scattered(
                    &items,
                    threads,
                    |&i| i as u64,
                    |share| {
                        if share.contains(&3) {
                            Err(3)
                        } else {
                            Ok(share.to_vec())
                        }
                    },
                );
                let want = if n > 3 { Err(3) } else { Ok(items.clone()) };
                assert_eq!(failed, want, "threads {threads}, n {n}");
            }
        }
    }
}
