//! Direct access to a store's RocksDB database, for the tests (of the
//! library and of the command line) that damage or inspect records (the
//! library's own dependency).
#![allow(dead_code)]

/// The RocksDB database of the store in `store_dir`, opened directly with
/// every column family (the store must be closed).
pub fn raw_db(store_dir: &std::path::Path) -> rocksdb::DB {
    let path = store_dir.join("db");
    let opts = rocksdb::Options::default();
    let names = rocksdb::DB::list_cf(&opts, &path).unwrap();
    rocksdb::DB::open_cf(&opts, &path, names).unwrap()
}

/// Flips the bits `mask` of byte `at` in the value of the first record of
/// column family `family` of the store in `store_dir` (closed); returns
/// that record's key.
pub fn flip_first_record(
    store_dir: &std::path::Path,
    family: &str,
    at: usize,
    mask: u8,
) -> Vec<u8> {
    let db = raw_db(store_dir);
    let cf = db.cf_handle(family).unwrap();
    let mut it = db.raw_iterator_cf(cf);
    it.seek_to_first();
    let key = it.key().unwrap().to_vec();
    let mut value = it.value().unwrap().to_vec();
    value[at] ^= mask;
    db.put_cf(cf, &key, &value).unwrap();
    key
}
