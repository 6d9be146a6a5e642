//! What [`Store::insert_many`](super::Store::insert_many) takes: a
//! fingerprint with an id, or with an optional id.

/// One fingerprint to store, with its document id when it has one:
/// `(fingerprint, id)` or `(fingerprint, Option<id>)` (`None` stores the
/// fingerprint alone). Implemented for those two tuples only.
pub trait Entry: Copy + Send + Sync + sealed::Sealed {
    /// The fingerprint.
    fn fingerprint(&self) -> u64;
    /// Its document id, if any.
    fn id(&self) -> Option<u64>;
}

impl Entry for (u64, u64) {
    fn fingerprint(&self) -> u64 {
        self.0
    }

    fn id(&self) -> Option<u64> {
        Some(self.1)
    }
}

impl Entry for (u64, Option<u64>) {
    fn fingerprint(&self) -> u64 {
        self.0
    }

    fn id(&self) -> Option<u64> {
        self.1
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for (u64, u64) {}
    impl Sealed for (u64, Option<u64>) {}
}
