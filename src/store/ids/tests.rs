//! Unit tests of the overlay (its shards, entries and changes, checked
//! against plain maps of pairs) and of the seek its walks use.

use std::collections::HashMap;

use super::overlay::*;
use super::reconcile::*;

#[test]
fn a_seek_finds_what_a_search_from_the_start_finds() {
    // Lists with repeats, of every length up to 70 and a long one, asked
    // about in increasing runs (close and far apart) that sometimes go
    // back, the position before each answer carried into the next seek.
    let mut rng = crate::test_rng::TestRng::new(11);
    for len in (0..70).chain([5_000]) {
        let mut items: Vec<u64> = (0..len).map(|_| rng.next_u64() % 400).collect();
        items.sort_unstable();
        let mut at = 0;
        let mut fp = 0;
        for _ in 0..300 {
            fp = match rng.next_u64() % 8 {
                0 => rng.next_u64() % 420,
                1 => fp + rng.next_u64() % 100,
                _ => fp + rng.next_u64() % 3,
            };
            at = seek(&items, at, fp, |&x| x);
            assert_eq!(at, items.partition_point(|&x| x < fp), "{len} {fp}");
            let mut walk = Walk::new(&items);
            assert_eq!(walk.has(fp, |&x| x), items.contains(&fp));
        }
    }
}

#[test]
fn entries_count_their_removals_through_every_change() {
    // Sets that add, remove, flip and drop entries, while the list is
    // shared (copied) and not, compared with a count of the list.
    let mut rng = crate::test_rng::TestRng::new(5);
    let mut overlay = Overlay::default();
    let mut held = Vec::new();
    for step in 0..4_000 {
        let fp = rng.next_u64() % 3;
        let id = rng.next_u64() % 50;
        let mark = match rng.next_u64() % 3 {
            0 => None,
            1 => Some(true),
            _ => Some(false),
        };
        overlay.set(fp, id, mark);
        if step % 7 == 0 {
            held.push(overlay.shared(fp));
        }
        if step % 501 == 0 {
            let list: Vec<(u64, bool)> = overlay.get(fp).iter().map(|&(i, a)| (i, !a)).collect();
            overlay.set_many(
                fp,
                &list.iter().map(|&(i, a)| (i, Some(a))).collect::<Vec<_>>(),
            );
        }
        for fp in 0..3 {
            let removed = overlay.get(fp).iter().filter(|e| !e.1).count();
            assert_eq!(
                overlay.entries(fp).map_or(0, Entries::removed),
                removed,
                "step {step}"
            );
        }
    }
    for entries in held.into_iter().flatten() {
        let removed = entries.as_slice().iter().filter(|e| !e.1).count();
        assert_eq!(
            entries.removed(),
            removed,
            "a shared list kept its own count"
        );
    }
}

#[test]
fn a_sharded_overlay_holds_what_one_map_would() {
    // Random 64-bit fingerprints over every shard, a few of them with
    // several ids: sets, removals and replacements against an ordered
    // map, and every way of reading the overlay back.
    use std::collections::BTreeMap;
    let mut rng = crate::test_rng::TestRng::new(21);
    let fps: Vec<u64> = (0..5_000).map(|_| rng.next_u64()).collect();
    let mut overlay = Overlay::default();
    let mut oracle: BTreeMap<u64, BTreeMap<u64, bool>> = BTreeMap::new();
    for step in 0..40_000 {
        let fp = fps[(rng.next_u64() % fps.len() as u64) as usize];
        let id = rng.next_u64() % 4;
        match rng.next_u64() % 10 {
            0 => {
                let list: Vec<(u64, bool)> =
                    (0..rng.next_u64() % 3).map(|i| (i * 5, i != 1)).collect();
                overlay.replace(fp, &list);
                oracle.remove(&fp);
                if !list.is_empty() {
                    oracle.insert(fp, list.into_iter().collect());
                }
            }
            1..=2 => {
                overlay.set(fp, id, None);
                if let Some(ids) = oracle.get_mut(&fp) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        oracle.remove(&fp);
                    }
                }
            }
            _ => {
                let added = step % 5 != 0;
                overlay.set(fp, id, Some(added));
                oracle.entry(fp).or_default().insert(id, added);
            }
        }
    }
    let want: Vec<(u64, Vec<(u64, bool)>)> = oracle
        .iter()
        .map(|(&fp, ids)| (fp, ids.iter().map(|(&i, &a)| (i, a)).collect()))
        .collect();
    let sorted: Vec<(u64, Vec<(u64, bool)>)> = overlay
        .sorted()
        .into_iter()
        .map(|(fp, e)| (fp, e.as_slice().to_vec()))
        .collect();
    assert_eq!(sorted, want);
    let mut iterated: Vec<(u64, Vec<(u64, bool)>)> =
        overlay.iter().map(|(fp, e)| (fp, e.to_vec())).collect();
    iterated.sort_unstable();
    assert_eq!(iterated, want);
    let mut listed: Vec<u64> = overlay.fingerprints().collect();
    listed.sort_unstable();
    assert_eq!(listed, oracle.keys().copied().collect::<Vec<_>>());
    assert_eq!(
        overlay.len(),
        oracle.values().map(BTreeMap::len).sum::<usize>()
    );
    for &fp in &fps {
        let want: Vec<(u64, bool)> = oracle
            .get(&fp)
            .map(|ids| ids.iter().map(|(&i, &a)| (i, a)).collect())
            .unwrap_or_default();
        assert_eq!(overlay.get(fp), &want[..], "{fp:x}");
    }
    let used = overlay.shards.iter().filter(|m| !m.is_empty()).count();
    assert!(used > SHARDS / 2, "{used} shards used");
}

#[test]
fn an_overlay_given_room_holds_that_many_without_growing() {
    let mut rng = crate::test_rng::TestRng::new(22);
    let n = 200_000;
    let mut overlay = Overlay::with_capacity(n);
    let before: Vec<usize> = overlay.shards.iter().map(HashMap::capacity).collect();
    for id in 0..n as u64 {
        overlay.set(rng.next_u64(), id, Some(true));
    }
    let after: Vec<usize> = overlay.shards.iter().map(HashMap::capacity).collect();
    assert_eq!(before, after);
    assert_eq!(overlay.len(), n);
}

#[test]
fn an_overlay_built_from_sorted_entries_equals_one_set_entry_by_entry() {
    let mut rng = crate::test_rng::TestRng::new(3);
    let mut entries: Vec<(u64, u64, bool)> = (0..2000)
        .map(|_| {
            (
                rng.next_u64() % 300,
                rng.next_u64() % 50,
                rng.next_u64().is_multiple_of(3),
            )
        })
        .collect();
    entries.sort_unstable_by_key(|&(fp, id, _)| (fp, id));
    entries.dedup_by_key(|&mut (fp, id, _)| (fp, id));
    let mut one_by_one = Overlay::default();
    for &(fp, id, added) in &entries {
        one_by_one.set(fp, id, Some(added));
    }
    let built = Overlay::from_sorted(&entries);
    assert_eq!(built.len(), one_by_one.len());
    assert_eq!(built.len(), entries.len());
    for fp in 0..300 {
        assert_eq!(built.get(fp), one_by_one.get(fp), "{fp}");
    }
}

#[test]
fn long_entry_lists_apply_as_short_ones_do_after_other_ids_too() {
    // Id lists and entry lists of every length around the switch to a
    // merge, entries adding ids present or not and removing them.
    let mut rng = crate::test_rng::TestRng::new(12);
    for round in 0..2_000 {
        let n = (rng.next_u64() % 60) as usize;
        let mut ids: Vec<u64> = (0..n).map(|_| rng.next_u64() % 100).collect();
        ids.sort_unstable();
        ids.dedup();
        let m = round % (2 * APPLY_BY_MERGE + 4);
        let mut list: Vec<(u64, bool)> = (0..m)
            .map(|_| (rng.next_u64() % 100, rng.next_u64().is_multiple_of(2)))
            .collect();
        list.sort_unstable_by_key(|&(id, _)| id);
        list.dedup_by_key(|&mut (id, _)| id);
        let mut expect: std::collections::BTreeSet<u64> = ids.iter().copied().collect();
        for &(id, added) in &list {
            match added {
                true => expect.insert(id),
                false => expect.remove(&id),
            };
        }
        // Applied to the whole list, and to the same list after other
        // ids (another fingerprint's, as a query's answers hold them),
        // which stay as they were.
        let expect: Vec<u64> = expect.into_iter().collect();
        let mut got = ids.clone();
        apply(&list, &mut got, 0);
        assert_eq!(got, expect, "round {round}");
        let before = [1_000, 5, 7];
        let mut got = before.to_vec();
        got.extend(&ids);
        apply(&list, &mut got, before.len());
        assert_eq!(got[..before.len()], before, "round {round}");
        assert_eq!(got[before.len()..], expect, "round {round}");
    }
}

#[test]
fn changes_merged_at_once_equal_changes_set_one_by_one() {
    // Lists of none, one and many entries; runs of changes adding,
    // re-marking and removing entries, of ids present or not.
    let mut rng = crate::test_rng::TestRng::new(8);
    let mut merged = Overlay::default();
    let mut one_by_one = Overlay::default();
    for round in 0..3_000 {
        let fp = rng.next_u64() % 30;
        let n = match round % 7 {
            0 => 400,
            _ => (rng.next_u64() % 6) as usize,
        };
        let mut changes: Vec<(u64, Option<bool>)> = (0..n)
            .map(|_| {
                let mark = match rng.next_u64() % 3 {
                    0 => None,
                    1 => Some(true),
                    _ => Some(false),
                };
                (rng.next_u64() % 500, mark)
            })
            .collect();
        changes.sort_unstable_by_key(|&(id, _)| id);
        changes.dedup_by_key(|&mut (id, _)| id);
        merged.set_many(fp, &changes);
        for &(id, mark) in &changes {
            one_by_one.set(fp, id, mark);
        }
        assert_eq!(merged.get(fp), one_by_one.get(fp), "round {round}");
        assert_eq!(merged.len(), one_by_one.len(), "round {round}");
    }
    assert!(
        merged.len() > 1_000,
        "the lists grew long: {}",
        merged.len()
    );
}

#[test]
fn replacing_a_fingerprints_entries_keeps_the_count() {
    // Lists of none, one and several entries replacing each other.
    let mut rng = crate::test_rng::TestRng::new(5);
    let mut overlay = Overlay::default();
    let mut model: std::collections::BTreeMap<u64, Vec<(u64, bool)>> = Default::default();
    for _ in 0..5_000 {
        let fp = rng.next_u64() % 40;
        let n = (rng.next_u64() % 4) as usize;
        let mut list: Vec<(u64, bool)> = (0..n)
            .map(|_| (rng.next_u64() % 20, rng.next_u64().is_multiple_of(2)))
            .collect();
        list.sort_unstable_by_key(|&(id, _)| id);
        list.dedup_by_key(|&mut (id, _)| id);
        overlay.replace(fp, &list);
        if list.is_empty() {
            model.remove(&fp);
        } else {
            model.insert(fp, list);
        }
        assert_eq!(overlay.len(), model.values().map(Vec::len).sum::<usize>());
    }
    for fp in 0..40 {
        assert_eq!(overlay.get(fp), model.get(&fp).map_or(&[][..], |l| &l[..]));
    }
    assert_eq!(overlay.fingerprints().count(), model.len());
}

#[test]
fn an_overlay_changed_entry_by_entry_matches_a_map_of_pairs() {
    // Few fingerprints and ids, so that lists grow from one entry to
    // several and shrink back to one and to none.
    let mut rng = crate::test_rng::TestRng::new(11);
    let mut overlay = Overlay::default();
    let mut model = std::collections::BTreeMap::new();
    for _ in 0..20_000 {
        let (fp, id) = (rng.next_u64() % 20, rng.next_u64() % 6);
        let mark = match rng.next_u64() % 3 {
            0 => None,
            1 => Some(true),
            _ => Some(false),
        };
        overlay.set(fp, id, mark);
        match mark {
            Some(added) => model.insert((fp, id), added),
            None => model.remove(&(fp, id)),
        };
        assert_eq!(overlay.len(), model.len());
        let want: Vec<(u64, bool)> = model
            .range((fp, 0)..=(fp, u64::MAX))
            .map(|(&(_, id), &added)| (id, added))
            .collect();
        assert_eq!(overlay.get(fp), want.as_slice());
    }
    let mut with: Vec<u64> = overlay.fingerprints().collect();
    with.sort_unstable();
    let mut want: Vec<u64> = model.keys().map(|&(fp, _)| fp).collect();
    want.dedup();
    assert_eq!(with, want);
    let copy = overlay.clone();
    for fp in 0..20 {
        assert_eq!(copy.get(fp), overlay.get(fp));
    }
}

#[test]
fn the_overlay_applies_and_difference_inverts_it() {
    let base = vec![1, 4, 9];
    for truth in [
        vec![],
        vec![1, 4, 9],
        vec![0, 4, 10],
        vec![2, 3],
        vec![1, 9, 20],
    ] {
        let d = difference(&base, &truth);
        let mut o = Overlay::default();
        o.replace(7, &d);
        let mut ids = base.clone();
        o.apply(7, &mut ids);
        assert_eq!(ids, truth, "{d:?}");
        assert_eq!(o.len(), d.len());
        let mut other = base.clone();
        o.apply(8, &mut other);
        assert_eq!(other, base);
    }
    let mut o = Overlay::default();
    o.set(1, 5, Some(true));
    o.set(1, 3, Some(false));
    o.set(1, 5, Some(false));
    assert_eq!(o.get(1), &[(3, false), (5, false)]);
    o.set(1, 3, None);
    o.set(1, 5, None);
    o.set(1, 9, None);
    assert_eq!(o.len(), 0);
    assert_eq!(o.fingerprints().count(), 0);
}
