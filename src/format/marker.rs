//! The marker file `SIMSTORE` that makes a directory a store. It is
//! checked before RocksDB is opened, so a directory that is not a store is
//! never written to.

/// File name of the marker, directly inside the store directory.
pub const FILE_NAME: &str = "SIMSTORE";

/// Name of the RocksDB directory inside the store directory.
pub const DB_DIR: &str = "db";

/// The marker's contents for a format version.
pub fn contents(version: u16) -> String {
    format!("simstore store\nformat {version}\n")
}

/// Parses a marker file; `None` when it is not one.
pub fn parse(text: &str) -> Option<u16> {
    let mut lines = text.lines();
    if lines.next()? != "simstore store" {
        return None;
    }
    let version = lines.next()?.strip_prefix("format ")?.parse().ok()?;
    lines.next().is_none().then_some(version)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        assert_eq!(super::parse(&super::contents(1)), Some(1));
        assert_eq!(super::parse("simstore store\n"), None);
        assert_eq!(super::parse("hello\nformat 1\n"), None);
    }
}
