//! A group of writes committed atomically by [`Db::write`](super::Db::write).

use rocksdb::{ColumnFamily, WriteBatch};

/// A column family's handle, as [`Db::family`](super::Db::family) and
/// [`Db::table`](super::Db::table) give it.
pub type Family = ColumnFamily;

/// An atomic group of puts and deletes across families.
#[derive(Default)]
pub struct Batch(WriteBatch);

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for about `bytes` of records, so a large
    /// one is not copied as it grows.
    pub fn with_capacity(bytes: usize) -> Self {
        Self(WriteBatch::with_capacity_bytes(bytes))
    }

    /// Sets `key` to `value` in `family`.
    pub fn put_cf(&mut self, family: &Family, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.0.put_cf(family, key, value);
    }

    /// Removes `key` from `family`.
    pub fn delete_cf(&mut self, family: &Family, key: impl AsRef<[u8]>) {
        self.0.delete_cf(family, key);
    }

    /// Removes every key of `family` in `from..to`.
    pub fn delete_range_cf(&mut self, family: &Family, from: &[u8], to: &[u8]) {
        self.0.delete_range_cf(family, from, to);
    }

    /// Removes every key of `family`, whose keys are all `key_bytes`
    /// long: the range from `00`×`key_bytes` to `ff`×(`key_bytes` + 1).
    pub fn delete_all_cf(&mut self, family: &Family, key_bytes: usize) {
        self.0
            .delete_range_cf(family, vec![0u8; key_bytes], vec![0xffu8; key_bytes + 1]);
    }

    /// Whether the batch holds no write.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The RocksDB batch, for the database to write.
    pub(super) fn into_inner(self) -> WriteBatch {
        self.0
    }
}
