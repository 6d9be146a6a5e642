//! Direct access to a store's RocksDB database, for the tests (of the
//! library and of the command line) that damage or inspect records (the
//! library's own dependency).

/// The RocksDB database of the store in `store_dir`, opened directly with
/// every column family (the store must be closed).
pub fn raw_db(store_dir: &std::path::Path) -> rocksdb::DB {
    let path = store_dir.join("db");
    let opts = rocksdb::Options::default();
    let names = rocksdb::DB::list_cf(&opts, &path).unwrap();
    rocksdb::DB::open_cf(&opts, &path, names).unwrap()
}
