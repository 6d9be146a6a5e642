//! The crate-wide error type: one matchable enum whose variants carry the
//! context a user needs to act on the failure.

use std::fmt;
use std::path::PathBuf;

use crate::codec::DecodeError;
use crate::plan::PlanError;

/// Where corruption was found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// A block of a permuted table, named by table number and block key
    /// (the block's first permuted fingerprint).
    Block {
        /// Table number (column family `table-NNN`).
        table: usize,
        /// The block's key.
        key: u64,
    },
    /// The id block of table 0's block with this key (the ids of that
    /// block's fingerprints).
    IdBlock {
        /// The table-0 block's key.
        key: u64,
    },
    /// A stored Huffman code of a table.
    Code {
        /// Table number.
        table: usize,
        /// Code id.
        code_id: u32,
    },
    /// The store's manifest (plan and creation options).
    Manifest,
    /// The persisted counters.
    Counters,
    /// A table's index record (its blocks' keys, lengths and counts).
    TableIndex {
        /// Table number.
        table: usize,
    },
    /// A key or value of the named column family outside the tables.
    Record {
        /// The column family.
        family: &'static str,
    },
    /// Reported by RocksDB itself (SST or WAL checksum, missing files).
    Database,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Block { table, key } => write!(f, "table {table} block {key:016x}"),
            Self::IdBlock { key } => write!(f, "id block {key:016x}"),
            Self::Code { table, code_id } => write!(f, "table {table} Huffman code {code_id}"),
            Self::Manifest => write!(f, "manifest"),
            Self::Counters => write!(f, "counters"),
            Self::TableIndex { table } => write!(f, "table {table} index"),
            Self::Record { family } => write!(f, "column family {family}"),
            Self::Database => write!(f, "database files"),
        }
    }
}

/// Everything that can go wrong in simstore.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The directory is not a simstore store (it is missing, or has no
    /// marker file, or one that does not parse as a marker); nothing was
    /// written to it.
    NotAStore {
        /// The directory.
        path: PathBuf,
    },
    /// `create` was asked for a directory that already holds files, or a
    /// path that is not a directory.
    AlreadyExists {
        /// The directory.
        path: PathBuf,
    },
    /// Another process (or another handle in this one) has the store open.
    Locked {
        /// The directory.
        path: PathBuf,
    },
    /// The store was written by a format version this build cannot read.
    UnsupportedVersion {
        /// Which structure carries the version.
        what: &'static str,
        /// The version this build supports.
        supported: u32,
        /// The version found.
        found: u32,
    },
    /// Options given at open contradict what the store was created with.
    IncompatibleOptions {
        /// The option.
        option: &'static str,
        /// The stored value.
        stored: String,
        /// The requested value.
        requested: String,
    },
    /// A query asked for a distance beyond the store's table plan.
    DistanceTooLarge {
        /// The distance asked for.
        asked: u32,
        /// The largest distance the tables answer.
        supported: u32,
    },
    /// No table plan fits the creation options.
    Plan(PlanError),
    /// An argument is out of its documented range.
    InvalidArgument(String),
    /// Stored bytes fail their checks; the answer that needed them is not
    /// given.
    Corrupt {
        /// Where.
        location: Location,
        /// What check failed.
        reason: String,
    },
    /// A file-system operation outside RocksDB failed.
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// RocksDB reported an error (I/O failure, disk full, ...).
    Storage {
        /// What simstore was doing.
        context: &'static str,
        /// RocksDB's message.
        message: String,
    },
    /// An earlier write failed and may or may not have reached the disk;
    /// the store refuses writes until it is reopened. Queries still work,
    /// except on tables kept on disk (beyond the memory budget) after a
    /// commit through table files failed before all of them went in:
    /// those, and `verify`, are refused with this error too, since the
    /// stored blocks lag the commit (the next open finishes it).
    Poisoned,
    /// Background work of the handle failed (a merge of pending
    /// fingerprints into the tables, or the reading of blocks into memory
    /// behind the open). Returned once, by the next write, `compact`,
    /// `flush`, `sync`, `reclaim_space` or `close` on the handle (a write
    /// or `compact` then does nothing else; `close` still syncs and
    /// flushes, and returns this error first). A merge that failed to commit also poisons
    /// the handle, as any failed write does (see
    /// [`Poisoned`](Self::Poisoned)): a write racing the failure may get
    /// `Poisoned` first and leave this error to the call after it.
    Background {
        /// What the background work was doing.
        task: &'static str,
        /// Why it failed.
        source: Box<Error>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAStore { path } => write!(f, "{} is not a simstore store (its SIMSTORE marker is missing or unreadable)", path.display()),
            Self::AlreadyExists { path } => {
                write!(f, "{} already exists and is not an empty directory; refusing to create a store there", path.display())
            }
            Self::Locked { path } => write!(f, "store {} is already open in another process or handle", path.display()),
            Self::UnsupportedVersion { what, supported, found } => {
                write!(f, "{what} has format version {found}, this build supports {supported}")
            }
            Self::IncompatibleOptions { option, stored, requested } => write!(
                f,
                "option {option} = {requested} contradicts the store, which was created with {option} = {stored}"
            ),
            Self::DistanceTooLarge { asked, supported } => write!(
                f,
                "distance {asked} exceeds the store's maximum distance {supported}; the tables cannot answer it"
            ),
            Self::Plan(e) => write!(f, "no table plan: {e}"),
            Self::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Self::Corrupt { location, reason } => write!(f, "corruption in {location}: {reason}"),
            Self::Io { path, source } => write!(f, "I/O error on {}: {source}", path.display()),
            Self::Storage { context, message } => write!(f, "storage error while {context}: {message}"),
            Self::Poisoned => write!(f, "an earlier write failed; the store must be reopened"),
            Self::Background { task, source } => write!(f, "background {task} failed: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Plan(e) => Some(e),
            Self::Background { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

impl From<PlanError> for Error {
    fn from(e: PlanError) -> Self {
        Self::Plan(e)
    }
}

impl Error {
    /// A corruption error for a block.
    pub(crate) fn block(table: usize, key: u64, e: &DecodeError) -> Self {
        Self::Corrupt {
            location: Location::Block { table, key },
            reason: e.to_string(),
        }
    }

    /// A corruption error anywhere.
    pub(crate) fn corrupt(location: Location, reason: impl Into<String>) -> Self {
        Self::Corrupt {
            location,
            reason: reason.into(),
        }
    }

    /// A copy for every request of a failed commit group: the same variant
    /// where it can be copied, a storage error carrying the message where
    /// it cannot.
    pub fn replicate(&self) -> Self {
        match self {
            Self::Corrupt { location, reason } => Self::Corrupt {
                location: location.clone(),
                reason: reason.clone(),
            },
            Self::Storage { context, message } => Self::Storage {
                context,
                message: message.clone(),
            },
            Self::Poisoned => Self::Poisoned,
            Self::DistanceTooLarge { asked, supported } => Self::DistanceTooLarge {
                asked: *asked,
                supported: *supported,
            },
            Self::InvalidArgument(m) => Self::InvalidArgument(m.clone()),
            Self::Plan(p) => Self::Plan(p.clone()),
            Self::Background { task, source } => Self::Background {
                task,
                source: Box::new(source.replicate()),
            },
            other => Self::Storage {
                context: "committing a write group",
                message: other.to_string(),
            },
        }
    }

    /// True when the error reports corrupt stored data.
    pub fn is_corruption(&self) -> bool {
        match self {
            Self::Corrupt { .. } => true,
            Self::Background { source, .. } => source.is_corruption(),
            _ => false,
        }
    }
}

/// Result alias for simstore operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
