//! The store directory and its marker file, checked before RocksDB is
//! touched so that a directory that is not a store is never written to.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::{marker, FORMAT_VERSION};

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Prepares `dir` for a new store: it must be absent or empty.
pub fn create_directory(dir: &Path) -> Result<()> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::AlreadyExists {
                    path: dir.to_path_buf(),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(io(dir))
        }
        Err(e) => Err(io(dir)(e)),
    }
}

/// Writes the marker durably (temporary file, fsync, rename, fsync of the
/// directory); the last step of creating a store.
pub fn write_marker(dir: &Path) -> Result<()> {
    let tmp = dir.join(format!("{}.tmp", marker::FILE_NAME));
    let path = dir.join(marker::FILE_NAME);
    let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(marker::contents(FORMAT_VERSION).as_bytes())
        .map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    fs::rename(&tmp, &path).map_err(io(&path))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// Checks that `dir` holds a store of a supported format version.
pub fn check_directory(dir: &Path) -> Result<()> {
    let path = dir.join(marker::FILE_NAME);
    let text = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Err(Error::NotAStore {
                path: dir.to_path_buf(),
            })
        }
        Err(e) => return Err(io(&path)(e)),
    };
    let version = std::str::from_utf8(&text)
        .ok()
        .and_then(marker::parse)
        .ok_or_else(|| Error::NotAStore {
            path: dir.to_path_buf(),
        })?;
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            what: "store directory",
            supported: u32::from(FORMAT_VERSION),
            found: u32::from(version),
        });
    }
    Ok(())
}
