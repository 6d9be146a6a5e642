//! The code against storage-format.md: the example block, index record
//! and table files record there are what the encoders produce, byte for byte, and a store's index
//! records list exactly its blocks.

mod common;
#[path = "common/raw.rs"]
mod raw;

use common::index_key;
use raw::raw_db;
use simstore::codec::{encode_blocks, BlockView, Code, SYMBOLS};
use simstore::format::records::{decode_index, encode_index, IndexEntry};

fn golden_block() -> Vec<u8> {
    golden("<!-- golden-block -->")
}

/// The hex bytes of the code block after `marker` in the document.
fn golden(marker: &str) -> Vec<u8> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/storage-format.md")).unwrap();
    let at = doc.find(marker).expect("golden marker");
    let rest = &doc[at..];
    let start = rest.find("```\n").unwrap() + 4;
    let end = start + rest[start..].find("```").unwrap();
    let hex: String = rest[start..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .unwrap_or_else(|_| panic!("bad hex in document: {hex}"))
        })
        .collect()
}

#[test]
fn example_block_matches_the_document() {
    let code = Code::from_counts(&[0; SYMBOLS]);
    assert!(code.lengths().iter().all(|&l| l == 6));
    let fps = [
        0x0123_4567_89ab_cdef,
        0x0123_4567_89ab_cdf0,
        0x0123_4567_89ac_0000,
        1 << 63,
        u64::MAX,
    ];
    let blocks = encode_blocks(&fps, &code, 0, 1024).unwrap();
    assert_eq!(blocks.len(), 1);
    let hex: String = blocks[0].iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(blocks[0], golden_block(), "encoder output: {hex}");
    let mut out = Vec::new();
    BlockView::parse(&blocks[0])
        .unwrap()
        .decode_into(&code, &mut out)
        .unwrap();
    assert_eq!(out, fps);
}

#[test]
fn example_index_record_matches_the_document() {
    let entries = [
        IndexEntry {
            key: 0x0123_4567_89ab_cdef,
            len: 41,
            count: 5,
        },
        IndexEntry {
            key: 0xfedc_ba98_7654_3210,
            len: 19,
            count: 1,
        },
    ];
    let doc = golden("<!-- golden-index -->");
    assert_eq!(encode_index(entries.iter().copied()), doc);
    assert_eq!(decode_index(&doc).unwrap(), entries);
    // The example block is the first entry's block.
    let block = golden_block();
    assert_eq!(block.len(), usize::from(entries[0].len));
    assert_eq!(
        BlockView::parse(&block).unwrap().count(),
        usize::from(entries[0].count)
    );
}

#[test]
fn example_manifest_matches_the_document() {
    use simstore::format::manifest::Manifest;
    let manifest = Manifest {
        version: simstore::format::FORMAT_VERSION,
        plan: simstore::plan::Plan::new(0, 1).unwrap(),
        block_size: 1024,
        expected_size: 10_000_000,
        sketches: false,
        idf: false,
        levels: 6,
    };
    let bytes = manifest.encode();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        bytes,
        golden("<!-- golden-manifest -->"),
        "encoder output: {hex}"
    );
    assert_eq!(Manifest::decode(&bytes).unwrap(), manifest);
}

#[test]
fn example_one_table_manifest_matches_the_document() {
    use simstore::format::manifest::Manifest;
    let manifest = Manifest {
        version: simstore::format::FORMAT_VERSION,
        plan: simstore::plan::Plan::for_size(3, 10_000_000, Some(1)).unwrap(),
        block_size: 1024,
        expected_size: 10_000_000,
        sketches: false,
        idf: false,
        levels: 6,
    };
    assert_eq!(manifest.plan.header_bits(), Some(23));
    let bytes = manifest.encode();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        bytes,
        golden("<!-- golden-manifest-one-table -->"),
        "encoder output: {hex}"
    );
    assert_eq!(Manifest::decode(&bytes).unwrap(), manifest);
    // A header width out of range is refused, not read as a plan.
    let mut bad = bytes.clone();
    bad[23] = 64;
    let crc = crc32fast::hash(&bad[..bad.len() - 4]);
    let at = bad.len() - 4;
    bad[at..].copy_from_slice(&crc.to_be_bytes());
    assert!(Manifest::decode(&bad).is_err());
}

#[test]
fn example_table_files_record_matches_the_document() {
    use simstore::format::records::{decode_table_files, encode_table_files};
    let doc = golden("<!-- golden-table-files -->");
    assert_eq!(encode_table_files(&[0, 3, 9]), doc);
    assert_eq!(decode_table_files(&doc).unwrap(), [0, 3, 9]);
}

/// Every table's index record in a store lists exactly its family's
/// blocks (key, length, header count), after bulk loads, incremental
/// compactions and deletions.
#[test]
fn index_records_list_the_stored_blocks() {
    use simstore::{Options, Store};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(
        &path,
        &Options::new().block_size(128).manual_compaction(true),
    )
    .unwrap();
    let mut x = 5u64;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x ^ (x >> 31)
    };
    let fps: Vec<u64> = (0..20_000).map(|_| next()).collect();
    store
        .insert_many(&fps[..10_000].iter().map(|&f| (f, 1)).collect::<Vec<_>>())
        .unwrap();
    for chunk in fps[10_000..].chunks(2_500) {
        for &f in chunk {
            store.insert_fingerprint(f).unwrap();
        }
        for &f in chunk.iter().step_by(7) {
            store.delete_fingerprint(f).unwrap();
        }
        store.compact().unwrap();
    }
    let tables = store.plan().tables().len();
    drop(store);
    let db = raw_db(&path);
    for t in 0..tables {
        let record = db.get(index_key(t as u16)).unwrap().expect("index record");
        let listed = decode_index(&record).unwrap();
        let cf = db.cf_handle(&format!("table-{t:03}")).unwrap();
        let stored: Vec<IndexEntry> = db
            .iterator_cf(cf, rocksdb::IteratorMode::Start)
            .map(|item| {
                let (k, v) = item.unwrap();
                IndexEntry {
                    key: u64::from_be_bytes(k[..].try_into().unwrap()),
                    len: v.len() as u16,
                    count: BlockView::parse(&v).unwrap().count() as u16,
                }
            })
            .collect();
        assert!(stored.len() > 100, "table {t}: {} blocks", stored.len());
        assert_eq!(listed, stored, "table {t}");
    }
}

/// A store of format 1 (no index records; made from the format-2 fixture
/// by removing them) opens, answers as before, and is upgraded through
/// the chain: index records listing its blocks (format 2), then id blocks
/// (format 3), with the manifest and marker of format 3; it then opens
/// from its index.
#[test]
fn format_1_stores_are_upgraded_when_opened() {
    use simstore::format::manifest::Manifest;
    use simstore::{Options, Store};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let (queries, want) = format_2_fixture(&path);
    let tables = 4u16;
    {
        let db = raw_db(&path);
        for t in 0..tables {
            db.delete(index_key(t)).unwrap();
        }
        let manifest = Manifest::decode(&db.get(b"manifest").unwrap().unwrap()).unwrap();
        assert_eq!(manifest.version, 2);
        assert_eq!(manifest.plan.tables().len(), usize::from(tables));
        let old = Manifest {
            version: 1,
            ..manifest
        };
        db.put(b"manifest", old.encode()).unwrap();
    }
    std::fs::write(path.join("SIMSTORE"), "simstore store\nformat 1\n").unwrap();

    let options = Options::new();
    let store = Store::open(&path, &options).unwrap();
    assert_eq!(answer_lines(&store, &queries), want);
    assert!(store.verify().unwrap().ok());
    drop(store);
    {
        let db = upgraded(&path);
        for t in 0..tables {
            let listed = decode_index(&db.get(index_key(t)).unwrap().unwrap()).unwrap();
            assert!(listed.len() > 10);
        }
    }
    let store = Store::open(&path, &options.warm(false)).unwrap();
    assert_eq!(answer_lines(&store, &queries), want);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn example_id_block_matches_the_document() {
    use simstore::format::ids::{encode_id_block, IdBlock};
    let lists: [&[u64]; 5] = [&[42], &[43, 44], &[], &[45], &[1000]];
    let bytes = encode_id_block(lists);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        bytes,
        golden("<!-- golden-id-block -->"),
        "encoder output: {hex}"
    );
    let block = IdBlock::parse(&bytes).unwrap();
    for (p, want) in lists.iter().enumerate() {
        assert_eq!(&block.ids(p), want);
    }
}

/// Copies a directory tree.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The store written by the release of format 5 (`make-format-5.sh`),
/// whose 120 pending fingerprints each have a `pending` key: it answers
/// as that release did, is upgraded to format 7 and answers the same
/// after a reopen and a compaction. Fingerprints inserted with ids after
/// the upgrade are pending by their pairs alone (no `pending` key), and
/// stay pending, ids and all, across reopens, beside the release's.
#[test]
fn format_5_stores_of_the_last_release_open_as_written() {
    use simstore::{Options, Store};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let (queries, want) = fixture("format-5", &path);
    drop(opened_as_written(&path, &queries, &want));
    drop(upgraded(&path));
    reopened_and_compacted(&path, &queries, &want);

    let path = dir.path().join("p");
    fixture("format-5", &path);
    let manual = Options::new().manual_compaction(true);
    let fresh: Vec<(u64, u64)> = (1..=50u64)
        .map(|i| (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i), 10_000 + i))
        .collect();
    let store = Store::open(&path, &manual).unwrap();
    store.insert_many(&fresh).unwrap();
    assert_eq!(store.stats().pending, 170);
    drop(store);
    let db = upgraded(&path);
    let pending_cf = db.cf_handle("pending").unwrap();
    let keys = db
        .iterator_cf(pending_cf, rocksdb::IteratorMode::Start)
        .count();
    assert_eq!(keys, 120, "the new pending fingerprints have no key");
    drop(db);
    for _ in 0..2 {
        let store = Store::open(&path, &manual).unwrap();
        assert_eq!(store.stats().pending, 170);
        for &(fp, id) in &fresh {
            let found = store.query(fp, 0).unwrap();
            assert_eq!(found.len(), 1, "{fp:016x}");
            assert_eq!(found[0].ids, vec![id]);
        }
        assert_eq!(answer_lines(&store, &queries), want);
        let report = store.verify().unwrap();
        assert!(report.ok(), "{:?}", report.problems);
    }
}

/// Counts the keys of each `ids` family of the closed store at `path`.
fn ids_keys(path: &std::path::Path) -> [usize; 2] {
    let db = raw_db(path);
    ["ids", "ids-alt"].map(|name| {
        let family = db.cf_handle(name).unwrap();
        db.iterator_cf(family, rocksdb::IteratorMode::Start).count()
    })
}

/// The store written by the release of format 6 (`make-format-6.sh`),
/// with one `ids` family holding the pending fingerprints' pairs and the
/// ids added to and removed from fingerprints in the tables: it answers
/// as that release did, is upgraded to format 7 with its pairs where they
/// were and the second family empty, and answers the same after a reopen
/// and a compaction. Then, upgraded again from the fixture, it takes
/// writes while merges into level 0 run (writers switched to the second
/// family), and answers every query as a model of its content says,
/// across reopens.
#[test]
fn format_6_stores_of_the_last_release_open_as_written() {
    use simstore::{Options, Store};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let (queries, want) = fixture("format-6", &path);
    drop(opened_as_written(&path, &queries, &want));
    drop(upgraded(&path));
    let [first, second] = ids_keys(&path);
    assert!((120..=140).contains(&first), "{first} pairs in ids");
    assert_eq!(second, 0);
    reopened_and_compacted(&path, &queries, &want);

    // An upgrade that stopped after adding the family, before the
    // manifest: opened again, it is finished.
    let path = dir.path().join("i");
    fixture("format-6", &path);
    {
        let mut db = raw_db(&path);
        db.create_cf("ids-alt", &rocksdb::Options::default())
            .unwrap();
    }
    drop(opened_as_written(&path, &queries, &want));
    drop(upgraded(&path));

    let path = dir.path().join("w");
    fixture("format-6", &path);
    let options = Options::new().merge_threshold(64);
    let store = Store::open(&path, &options).unwrap();
    let fresh: Vec<(u64, u64)> = (1..=3000u64)
        .map(|i| (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i), 20_000 + i))
        .collect();
    for chunk in fresh.chunks(25) {
        store.insert_many(chunk).unwrap();
    }
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(store.stats().ids, 2766 + 3000);
    drop(store);
    for round in 0..2 {
        let store = Store::open(&path, &Options::new().warm(round == 0)).unwrap();
        for &(fp, id) in fresh.iter().step_by(7) {
            let found = store.query(fp, 0).unwrap();
            assert_eq!(found.len(), 1, "{fp:016x}");
            assert_eq!(found[0].ids, vec![id]);
        }
        // The fixture's fingerprints answer as the release did, except
        // where a fresh fingerprint is near a query.
        let lines = answer_lines(&store, &queries);
        let fresh_fps: std::collections::HashSet<String> =
            fresh.iter().map(|&(fp, _)| format!("{fp:016x}")).collect();
        let old: Vec<String> = lines
            .into_iter()
            .filter(|l| !fresh_fps.contains(l.split(' ').nth(1).unwrap()))
            .collect();
        assert_eq!(old, want);
        let report = store.verify().unwrap();
        assert!(report.ok(), "{:?}", report.problems);
        store.compact().unwrap();
    }
    assert_eq!(ids_keys(&path), [0, 0], "compacted with no write beside it");
}

/// Checks that the closed store at `path` says format 7 in its marker and
/// manifest, without sketches, with six levels of tables, each with its
/// families and index records, and both `ids` families (the upgrades run
/// one after the other); returns its database.
fn upgraded(path: &std::path::Path) -> rocksdb::DB {
    use simstore::format::manifest::Manifest;
    assert_eq!(
        std::fs::read_to_string(path.join("SIMSTORE")).unwrap(),
        "simstore store\nformat 7\n"
    );
    let db = raw_db(path);
    assert!(db.cf_handle("ids").is_some() && db.cf_handle("ids-alt").is_some());
    let manifest = Manifest::decode(&db.get(b"manifest").unwrap().unwrap()).unwrap();
    assert_eq!(manifest.version, 7);
    assert_eq!(manifest.levels, 6);
    assert!(!manifest.sketches);
    assert!(db.cf_handle("sketches").is_none());
    let tables = manifest.plan.tables().len() * 6;
    for t in 0..tables {
        assert!(
            db.cf_handle(&format!("table-{t:03}")).is_some(),
            "table {t}"
        );
        assert!(db.get(index_key(t as u16)).unwrap().is_some(), "index {t}");
    }
    assert!(db.cf_handle(&format!("table-{tables:03}")).is_none());
    db
}

/// Copies the format-2 fixture store to `path`; returns its queries and
/// the answers the release that wrote it gave, as `answer_lines` has them.
fn format_2_fixture(path: &std::path::Path) -> (Vec<u64>, Vec<String>) {
    fixture("format-2", path)
}

/// Copies the fixture store `name` to `path`; returns its queries and the
/// answers the release that wrote it gave, as `answer_lines` has them.
fn fixture(name: &str, path: &std::path::Path) -> (Vec<u64>, Vec<String>) {
    let fixtures = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"));
    copy_tree(&fixtures.join(name), path);
    let queries = std::fs::read_to_string(fixtures.join(format!("{name}.queries")))
        .unwrap()
        .lines()
        .map(|l| u64::from_str_radix(l, 16).unwrap())
        .collect();
    let want = std::fs::read_to_string(fixtures.join(format!("{name}.answers")))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    (queries, want)
}

/// `query fingerprint distance ids` lines, as the fixture's answers file
/// has them.
fn answer_lines(store: &simstore::Store, queries: &[u64]) -> Vec<String> {
    let mut lines = Vec::new();
    for &q in queries {
        for m in store.query(q, 3).unwrap() {
            let ids: Vec<String> = m.ids.iter().map(u64::to_string).collect();
            lines.push(format!(
                "{q:016x} {:016x} {} {}",
                m.fingerprint,
                m.distance,
                ids.join(",")
            ));
        }
    }
    lines
}

/// A store written by the last release of format 2 (`tests/fixtures/`,
/// made by `make-format-2.sh`: ids in its tables and pending, several ids
/// and none, removed pairs and tombstones) is upgraded when opened: it
/// answers every query as that release did, ids included, verifies
/// clean, says format 3, keeps only the pending fingerprints' pairs in the
/// `ids` family, and answers the same after a reopen and a compaction.
#[test]
fn format_2_stores_of_the_last_release_are_upgraded_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let (queries, want) = format_2_fixture(&path);
    assert!(
        want.iter().any(|l| l.ends_with(' ')),
        "a fingerprint without ids"
    );
    assert!(
        want.iter().any(|l| l.contains(',')),
        "a fingerprint with several ids"
    );

    drop(opened_as_written(&path, &queries, &want));
    {
        let db = upgraded(&path);
        let ids = db.cf_handle("ids").unwrap();
        // The 120 pending fingerprints' pairs, plus the pairs written since
        // the fixture's last merge: ids added to fingerprints in the
        // tables, and removed ones.
        let left = db.iterator_cf(ids, rocksdb::IteratorMode::Start).count();
        assert!((120..=140).contains(&left), "{left} pairs left in ids");
        let blocks = db.cf_handle("id-blocks").unwrap();
        assert!(db.iterator_cf(blocks, rocksdb::IteratorMode::Start).count() > 100);
    }
    reopened_and_compacted(&path, &queries, &want);
}

/// A store written by the last release of format 3 (`tests/fixtures/`,
/// made by `make-format-3.sh` from the same operations as the format-2
/// fixture) is upgraded when opened: it answers every query as that
/// release did, ids included, verifies clean, says format 4 without
/// sketches, and answers the same after a reopen and a compaction.
#[test]
fn format_3_stores_of_the_last_release_are_upgraded_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let (queries, want) = fixture("format-3", &path);
    assert_eq!(want.len(), 804);
    let store = opened_as_written(&path, &queries, &want);
    assert!(!store.stats().sketches && !store.keeps_sketches());
    drop(store);
    drop(upgraded(&path));
    reopened_and_compacted(&path, &queries, &want);
}

/// Opens the fixture store copied to `path` (made by the operations of
/// `make-format-2.sh`) and checks it answers `queries` as `want` says,
/// verifies clean and holds the fixture's counts.
fn opened_as_written(path: &std::path::Path, queries: &[u64], want: &[String]) -> simstore::Store {
    use simstore::{Options, Store};
    let store = Store::open(path, &Options::new()).unwrap();
    assert_eq!(answer_lines(&store, queries), want);
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    let stats = store.stats();
    assert_eq!(
        (stats.fingerprints, stats.ids, stats.pending),
        (2658, 2766, 120)
    );
    store
}

/// Reopens the store at `path` with its tables left on disk, and checks it
/// answers `queries` as `want` says before and after a compaction, then
/// verifies clean with every pair kept.
fn reopened_and_compacted(path: &std::path::Path, queries: &[u64], want: &[String]) {
    use simstore::{Options, Store};
    let store = Store::open(path, &Options::new().warm(false)).unwrap();
    assert_eq!(answer_lines(&store, queries), want);
    store.compact().unwrap();
    assert_eq!(answer_lines(&store, queries), want);
    assert!(store.verify().unwrap().ok());
    assert_eq!(store.stats().ids, 2766);
}

/// The sketch record of the document's example: the sketch of the test
/// sentence under default options, stored for the pair (its fingerprint,
/// 42).
#[test]
fn example_sketch_record_matches_the_document() {
    use simstore::format::sketches::{decode_sketch, encode_sketch};
    use simstore::simhash::Fingerprinter;
    let sketch = Fingerprinter::new()
        .sketch("The quick brown fox jumps over the lazy dog.")
        .unwrap();
    let fp = sketch.fingerprint();
    let bytes = encode_sketch(fp, 42, &sketch.to_bytes());
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        bytes.to_vec(),
        golden("<!-- golden-sketch-record -->"),
        "encoder output: {hex} (fingerprint {fp:016x})"
    );
    assert_eq!(decode_sketch(fp, 42, &bytes), Ok(sketch.to_bytes()));
}

#[test]
fn example_idf_record_matches_the_document() {
    use simstore::format::idf::{decode_idf, encode_idf};
    let common = [(0x11, 2), (simstore::simhash::feature_hash("hello"), 3)];
    let bytes = encode_idf(3, &common);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        bytes,
        golden("<!-- golden-idf-record -->"),
        "encoder output: {hex}"
    );
    assert_eq!(decode_idf(&bytes), Ok((3, common.to_vec())));
}

/// A store created with document frequencies keeps them: reopened, it
/// has the same; asked for others, it refuses; its record damaged, it is
/// reported at open.
#[test]
fn document_frequencies_are_kept_with_the_store() {
    use simstore::simhash::{Fingerprinter, Idf};
    use simstore::{Error, Options, Store};
    let f = Fingerprinter::new();
    let docs = ["a b c d e f", "a b c x y z", "a b c d e g", "p q r s"];
    let idf = Idf::learn(docs.iter().map(|d| f.feature_hashes(d)));
    assert_eq!((idf.documents(), idf.common().len()), (4, 3));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, &Options::new().idf(idf.clone())).unwrap();
    assert_eq!(store.idf(), Some(&idf));
    assert_eq!(store.stats().idf_documents, Some(4));
    drop(store);
    let store = Store::open(&path, &Options::new().idf(idf.clone())).unwrap();
    assert_eq!(store.idf(), Some(&idf));
    assert!(store.verify().unwrap().ok());
    drop(store);
    let other = Idf::learn(docs[..2].iter().map(|d| f.feature_hashes(d)));
    assert!(matches!(
        Store::open(&path, &Options::new().idf(other)),
        Err(Error::IncompatibleOptions { option: "idf", .. })
    ));
    {
        let db = raw_db(&path);
        let mut bytes = db.get(b"idf").unwrap().unwrap();
        bytes[3] ^= 1;
        db.put(b"idf", bytes).unwrap();
    }
    assert!(matches!(
        Store::open(&path, &Options::new()),
        Err(Error::Corrupt { .. })
    ));
    // A store created without them has none.
    let plain = Store::create(dir.path().join("p"), &Options::new()).unwrap();
    assert_eq!((plain.idf(), plain.stats().idf_documents), (None, None));
}

/// The stores written by the release of format 4 (`make-format-4.sh`):
/// the plain one answers as that release did, is upgraded to format 7
/// (levels, then pending fingerprints named by their pairs, then the
/// second `ids` family) and answers
/// the same after a reopen and a compaction; the one
/// `dedup
/// --similarity` made holds, for each document, the sketch this build
/// computes from its text (the sketch definition has not moved), and
/// verifies clean.
#[test]
fn format_4_stores_of_the_last_release_open_as_written() {
    use simstore::simhash::Fingerprinter;
    use simstore::{Options, Store};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let (queries, want) = fixture("format-4", &path);
    drop(opened_as_written(&path, &queries, &want));
    drop(upgraded(&path));
    reopened_and_compacted(&path, &queries, &want);

    let fixtures = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"));
    let path = dir.path().join("k");
    copy_tree(&fixtures.join("format-4-sketches"), &path);
    let store = Store::open(&path, &Options::new().sketches(true)).unwrap();
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.sketches, 60);
    assert_eq!(report.levels, 6);
    let jsonl = std::fs::read_to_string(fixtures.join("format-4-sketches.jsonl")).unwrap();
    let f = Fingerprinter::new();
    for (n, line) in jsonl.lines().enumerate() {
        let text = line
            .split("\"text\": \"")
            .nth(1)
            .and_then(|t| t.strip_suffix("\"}"))
            .unwrap();
        let sketch = f.sketch(text).unwrap();
        assert_eq!(
            store.sketch(sketch.fingerprint(), n as u64).unwrap(),
            Some(sketch),
            "document {n}"
        );
        let similar = store
            .query_similar(sketch.fingerprint(), 8, &sketch, 0.8)
            .unwrap();
        assert!(similar
            .iter()
            .any(|s| s.id == n as u64 && s.similarity == 1.0));
    }
}
