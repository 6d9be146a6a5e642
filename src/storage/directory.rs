//! The store directory and its marker file, checked before RocksDB is
//! touched so that a directory that is not a store is never written to.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{marker, FORMAT_VERSION, OLDEST_FORMAT_VERSION};

/// Maps an I/O error on `path` to [`Error::Io`].
pub fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Checks that `dir` may receive a new store (absent or an empty
/// directory) and makes an empty staging directory beside it to build the
/// store in. Anything else at `dir`, a file included, is
/// [`Error::AlreadyExists`].
pub fn staging_directory(dir: &Path) -> Result<PathBuf> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::AlreadyExists {
                    path: dir.to_path_buf(),
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::AlreadyExists {
                path: dir.to_path_buf(),
            })
        }
        Err(e) => return Err(io(dir)(e)),
    }
    let name = dir.file_name().ok_or_else(|| {
        Error::InvalidArgument(format!("{} does not name a directory", dir.display()))
    })?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(io(&parent))?;
    let staging = parent.join(format!(
        ".{}.creating.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    fs::create_dir(&staging).map_err(io(&staging))?;
    Ok(staging)
}

/// Renames the finished staging directory to `dir` (absent or an empty
/// directory, which rename replaces atomically) and syncs the parent.
pub fn publish(staging: &Path, dir: &Path) -> Result<()> {
    fs::rename(staging, dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::DirectoryNotEmpty | std::io::ErrorKind::AlreadyExists => {
            Error::AlreadyExists {
                path: dir.to_path_buf(),
            }
        }
        _ => io(dir)(e),
    })?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    sync_directory(&parent)
}

/// Fsyncs a directory, so the names created or removed in it are durable.
pub fn sync_directory(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
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
    sync_directory(dir)
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
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(Error::UnsupportedVersion {
            what: "store directory",
            supported: u32::from(FORMAT_VERSION),
            found: u32::from(version),
        });
    }
    Ok(())
}
