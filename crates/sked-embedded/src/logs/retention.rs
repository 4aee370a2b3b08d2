//! Retention of the file log store: removing attempt logs last written before a cutoff, as
//! [`FileLogStore::remove_older_than`] and as the [`LogRetention`] port (a bounded batch per
//! call).
//!
//! What it owns: walking `<root>/<tenant>/<run_id>/` for `*.log` files, deleting the old
//! ones, and removing run and tenant folders left empty. What it must not do: decide the
//! retention period (the deployment's config does) or touch anything but `.log` files.

use super::FileLogStore;
use async_trait::async_trait;
use sked_core::Timestamp;
use sked_core::ports::{LogError, LogRetention};
use std::fs;
use std::io;
use std::path::Path;
use std::time::SystemTime;

impl FileLogStore {
    /// Removes every attempt log last modified before `cutoff` (e.g. now minus the retention
    /// days), and the folders that leaves empty. Returns how many logs were removed.
    pub async fn remove_older_than(&self, cutoff: SystemTime) -> Result<u64, LogError> {
        self.remove(cutoff, usize::MAX).await
    }

    /// At most `limit` of them.
    async fn remove(&self, cutoff: SystemTime, limit: usize) -> Result<u64, LogError> {
        let root = self.root().to_path_buf();
        tokio::task::spawn_blocking(move || remove_older_than(&root, cutoff, limit))
            .await
            .map_err(|e| LogError::Io(Box::new(io::Error::other(e))))?
            .map_err(|e| LogError::Io(Box::new(e)))
    }
}

#[async_trait]
impl LogRetention for FileLogStore {
    /// Whole logs: those whose file was last written before `cutoff`.
    async fn remove_before(&self, cutoff: Timestamp, limit: usize) -> Result<u64, LogError> {
        self.remove(SystemTime::from(cutoff), limit).await
    }
}

/// The blocking walk behind [`FileLogStore::remove_older_than`]: stops after `limit` removals
/// (a run folder it stops in is left for the next call).
fn remove_older_than(root: &Path, cutoff: SystemTime, limit: usize) -> io::Result<u64> {
    let mut removed = 0;
    for tenant in dirs(root)? {
        for run in dirs(&tenant)? {
            for entry in fs::read_dir(&run)? {
                if removed as usize >= limit {
                    return Ok(removed);
                }
                let path = entry?.path();
                let is_log = path.extension().is_some_and(|e| e == "log");
                // A file gone meanwhile (or unreadable) is left to the next pass.
                let old = fs::metadata(&path).and_then(|m| m.modified()).is_ok_and(|t| t < cutoff);
                if is_log && old && fs::remove_file(&path).is_ok() {
                    removed += 1;
                }
            }
            // Fails while the folder still holds something: that is the point.
            let _ = fs::remove_dir(&run);
        }
        let _ = fs::remove_dir(&tenant);
    }
    Ok(removed)
}

/// The folders directly in `dir` (none if `dir` does not exist yet).
fn dirs(dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            found.push(entry.path());
        }
    }
    Ok(found)
}
