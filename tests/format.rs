//! The code against storage-format.md: the example block, index record
//! and table files record there are what the encoders produce, byte for byte, and a store's index
//! records list exactly its blocks.

mod common;

use common::{index_key, raw_db};
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
        .insert_batch(&fps[..10_000].iter().map(|&f| (f, 1)).collect::<Vec<_>>())
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

/// A store of format 1 (no index records) opens, answers as before, and
/// is upgraded: index records listing its blocks, a version-2 manifest and
/// marker; it then opens from its index.
#[test]
fn format_1_stores_are_upgraded_when_opened() {
    use simstore::format::manifest::Manifest;
    use simstore::{Options, Store};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let options = Options::new().block_size(128).manual_compaction(true);
    let store = Store::create(&path, &options).unwrap();
    let fps: Vec<u64> = (0..5_000u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 7))
        .collect();
    store
        .insert_batch(&fps.iter().map(|&f| (f, 2)).collect::<Vec<_>>())
        .unwrap();
    store.compact().unwrap();
    store.insert(fps[0] ^ 0xff00, 3).unwrap();
    let queries: Vec<u64> = fps.iter().step_by(37).map(|f| f ^ 0b1011).collect();
    let answers: Vec<_> = queries
        .iter()
        .map(|&q| store.query(q, 3).unwrap())
        .collect();
    let tables = store.plan().tables().len() as u16;
    drop(store);

    {
        let db = raw_db(&path);
        for t in 0..tables {
            db.delete(index_key(t)).unwrap();
        }
        let manifest = Manifest::decode(&db.get(b"manifest").unwrap().unwrap()).unwrap();
        assert_eq!(manifest.version, 2);
        let old = Manifest {
            version: 1,
            ..manifest
        };
        db.put(b"manifest", old.encode()).unwrap();
    }
    std::fs::write(path.join("SIMSTORE"), "simstore store\nformat 1\n").unwrap();

    let store = Store::open(&path, &options).unwrap();
    for (q, want) in queries.iter().zip(&answers) {
        assert_eq!(&store.query(*q, 3).unwrap(), want);
    }
    assert!(store.verify().unwrap().ok());
    drop(store);
    assert_eq!(
        std::fs::read_to_string(path.join("SIMSTORE")).unwrap(),
        "simstore store\nformat 2\n"
    );
    {
        let db = raw_db(&path);
        let manifest = Manifest::decode(&db.get(b"manifest").unwrap().unwrap()).unwrap();
        assert_eq!(manifest.version, 2);
        for t in 0..tables {
            let listed = decode_index(&db.get(index_key(t)).unwrap().unwrap()).unwrap();
            assert!(listed.len() > 10);
        }
    }
    let store = Store::open(&path, &options.warm(false)).unwrap();
    for (q, want) in queries.iter().zip(&answers) {
        assert_eq!(&store.query(*q, 3).unwrap(), want);
    }
    assert!(store.verify().unwrap().ok());
}
