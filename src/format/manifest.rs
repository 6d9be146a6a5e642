//! The manifest: the store's creation options and its complete table plan.
//!
//! ```text
//! | magic "SIMSTORE" 8 | version u16 BE | max_distance u8 | blocks u8 | tables u8 |
//! | block_size u16 BE | expected_size u64 BE |
//! | per table: prefix_bits u8 | source [u8; 64] | ... |
//! | features u8 (format 4 and later) | levels u8 (format 5 and later) |
//! | crc32 u32 BE |
//! ```
//!
//! `levels`: the number of levels, each a complete set of the plan's
//! tables (`levels * tables` table families); 1 before format 5.
//!
//! `features` bit 0: the store keeps a similarity sketch per pair (the
//! `sketches` family); bit 1: it holds a document-frequency record; the
//! other bits are zero.

use zerocopy::byteorder::{BigEndian, U16, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{checked_body, seal, FORMAT_VERSION, OLDEST_FORMAT_VERSION};
use crate::plan::{Permutation, Plan};

/// The manifest's magic bytes.
pub const MAGIC: [u8; 8] = *b"SIMSTORE";

/// The fixed part of the manifest.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct ManifestHeader {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// Store format version.
    pub version: U16<BigEndian>,
    /// The maximum distance `k` the tables answer.
    pub max_distance: u8,
    /// The number of blocks `r` the 64 bits are split into.
    pub blocks: u8,
    /// The number of tables, `C(r, k)`.
    pub tables: u8,
    /// The largest encoded block, in bytes (1024 unless set for tests).
    pub block_size: U16<BigEndian>,
    /// The expected collection size the planner was given.
    pub expected_size: U64<BigEndian>,
}

/// One table's entry: prefix width then the 64-byte bit map.
const TABLE_ENTRY_LEN: usize = 65;

/// The decoded manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The store format version it was written under (a store of an
    /// older version is upgraded when opened).
    pub version: u16,
    /// The table plan.
    pub plan: Plan,
    /// The largest encoded block, in bytes.
    pub block_size: u16,
    /// The expected collection size the planner was given.
    pub expected_size: u64,
    /// Whether the store keeps a similarity sketch per pair (format 4 and
    /// later; always false before).
    pub sketches: bool,
    /// Whether the store holds a document-frequency record (format 4 and
    /// later).
    pub idf: bool,
    /// Levels of tables (format 5 and later; 1 before).
    pub levels: u8,
}

/// The most levels a manifest may name.
pub const MAX_LEVELS: u8 = 16;

/// `features` bit: sketches are kept.
const FEATURE_SKETCHES: u8 = 1;

/// `features` bit: a document-frequency record is held.
const FEATURE_IDF: u8 = 2;

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestError {
    /// Bytes fail a structural or checksum check.
    Corrupt(String),
    /// A format version this build does not read.
    Version(u16),
}

impl Manifest {
    /// Encodes the manifest.
    pub fn encode(&self) -> Vec<u8> {
        let plan = &self.plan;
        let header = ManifestHeader {
            magic: MAGIC,
            version: self.version.into(),
            max_distance: plan.max_distance(),
            blocks: plan.blocks(),
            tables: plan.tables().len() as u8,
            block_size: self.block_size.into(),
            expected_size: self.expected_size.into(),
        };
        let mut out = header.as_bytes().to_vec();
        for t in plan.tables() {
            out.push(t.prefix_bits);
            out.extend_from_slice(t.permutation.source());
        }
        if self.version >= 4 {
            let mut features = 0;
            if self.sketches {
                features |= FEATURE_SKETCHES;
            }
            if self.idf {
                features |= FEATURE_IDF;
            }
            out.push(features);
        }
        if self.version >= 5 {
            out.push(self.levels);
        }
        seal(out)
    }

    /// Decodes a manifest and checks that the stored permutations are
    /// exactly the plan its `(max_distance, blocks)` describe (for the
    /// one-table plan, `blocks` 1 at a distance above 0, with the header
    /// width its one table's prefix).
    pub fn decode(bytes: &[u8]) -> Result<Self, ManifestError> {
        let corrupt = |m: String| ManifestError::Corrupt(m);
        // Check the version before the checksum so that a newer, longer
        // layout is reported as such rather than as corruption.
        if let Ok((h, _)) = ManifestHeader::read_from_prefix(bytes) {
            let version = h.version.get();
            if h.magic == MAGIC && !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
                return Err(ManifestError::Version(h.version.get()));
            }
        }
        let body = checked_body(bytes).map_err(corrupt)?;
        let (header, rest) = ManifestHeader::read_from_prefix(body)
            .map_err(|_| corrupt("manifest too short".into()))?;
        if header.magic != MAGIC {
            return Err(corrupt("bad magic".into()));
        }
        let (rest, levels) = match header.version.get() {
            5.. => match rest.split_last() {
                Some((&levels, rest)) => (rest, levels),
                None => return Err(corrupt("no levels byte".into())),
            },
            _ => (rest, 1),
        };
        if !(1..=MAX_LEVELS).contains(&levels) {
            return Err(corrupt(format!(
                "{levels} levels, expected 1 to {MAX_LEVELS}"
            )));
        }
        let (rest, features) = match header.version.get() {
            4.. => match rest.split_last() {
                Some((&features, rest)) => (rest, features),
                None => return Err(corrupt("no features byte".into())),
            },
            _ => (rest, 0),
        };
        if features & !(FEATURE_SKETCHES | FEATURE_IDF) != 0 {
            return Err(corrupt(format!("unknown features {features:#04x}")));
        }
        if rest.len() != usize::from(header.tables) * TABLE_ENTRY_LEN {
            return Err(corrupt(format!(
                "{} table bytes for {} tables",
                rest.len(),
                header.tables
            )));
        }
        let plan = if header.blocks == 1 && header.max_distance > 0 {
            // The one-table plan: its header width is the table's prefix.
            let width = rest.first().copied().unwrap_or(0);
            Plan::one_table(header.max_distance, width)
        } else {
            Plan::new(header.max_distance, header.blocks)
        }
        .map_err(|e| corrupt(e.to_string()))?;
        if plan.tables().len() != usize::from(header.tables) {
            return Err(corrupt("table count does not match the plan".into()));
        }
        for (i, (entry, spec)) in rest
            .chunks_exact(TABLE_ENTRY_LEN)
            .zip(plan.tables())
            .enumerate()
        {
            let source: [u8; 64] = entry[1..]
                .try_into()
                .map_err(|_| corrupt("short table entry".into()))?;
            let perm = Permutation::from_source(source).map_err(|e| {
                corrupt(format!(
                    "table {i}: bit map is not a permutation at position {}",
                    e.position
                ))
            })?;
            if entry[0] != spec.prefix_bits || perm != spec.permutation {
                return Err(corrupt(format!(
                    "table {i} does not match the plan for its distance and blocks"
                )));
            }
        }
        if header.block_size.get() < crate::codec::MIN_BLOCK_LEN as u16 {
            return Err(corrupt(format!(
                "block size {} below minimum",
                header.block_size.get()
            )));
        }
        Ok(Self {
            version: header.version.get(),
            plan,
            block_size: header.block_size.get(),
            expected_size: header.expected_size.get(),
            sketches: features & FEATURE_SKETCHES != 0,
            idf: features & FEATURE_IDF != 0,
            levels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let m = Manifest {
            version: FORMAT_VERSION,
            plan: Plan::new(3, 5).unwrap(),
            block_size: 1024,
            expected_size: 1 << 30,
            sketches: true,
            idf: true,
            levels: 6,
        };
        let bytes = m.encode();
        assert_eq!(bytes.len(), 23 + 10 * 65 + 2 + 4);
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 4;
            assert!(Manifest::decode(&bad).is_err(), "flip at {i}");
        }
        let mut newer = bytes.clone();
        newer[9] = (FORMAT_VERSION + 1) as u8;
        assert_eq!(
            Manifest::decode(&newer),
            Err(ManifestError::Version(FORMAT_VERSION + 1))
        );
        // Before format 4 there is no features byte: no sketches; before
        // format 5 no levels byte: one level.
        for version in 1..5 {
            let older = Manifest {
                version,
                sketches: version == 4,
                idf: false,
                levels: 1,
                ..m.clone()
            };
            let bytes = older.encode();
            let features = usize::from(version == 4);
            assert_eq!(bytes.len(), 23 + 10 * 65 + features + 4);
            assert_eq!(Manifest::decode(&bytes).unwrap(), older);
        }
        for levels in [0, MAX_LEVELS + 1] {
            let bad = Manifest {
                levels,
                ..m.clone()
            };
            assert!(matches!(
                Manifest::decode(&bad.encode()),
                Err(ManifestError::Corrupt(m)) if m.contains("levels")
            ));
        }
        let plain = Manifest {
            sketches: false,
            idf: false,
            ..m.clone()
        };
        assert_eq!(Manifest::decode(&plain.encode()).unwrap(), plain);
        let mut unknown = plain.encode();
        let at = unknown.len() - 6;
        unknown[at] = 4;
        let body = unknown.len() - 4;
        let crc = crate::format::crc(&unknown[..body]).to_be_bytes();
        unknown[body..].copy_from_slice(&crc);
        assert!(matches!(
            Manifest::decode(&unknown),
            Err(ManifestError::Corrupt(m)) if m.contains("unknown features")
        ));
    }
}
