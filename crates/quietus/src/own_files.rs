//! [`OwnFiles`]: the files quietus writes itself, shared by the log spill (which registers
//! them) and the file tracker (which never counts them as activity).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::RwLock;

/// The files quietus (or its caller) writes itself during a run: never activity.
///
/// Held by identity: every path is kept as given (made absolute) and resolved (symbolic links
/// followed; a file that does not exist yet by its resolved folder), and an event path matches
/// when it is one of those, or when it names the same file through the resolved form of the
/// watched root it arrived under. Shared with the log spill, which registers each log file
/// before creating it, so not even its creation counts.
#[derive(Debug, Default, Clone)]
pub(crate) struct OwnFiles(Arc<RwLock<Vec<PathBuf>>>);

impl OwnFiles {
    /// Registers `path` (relative: from this process's current directory).
    pub(crate) fn add(&self, path: &Path) {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let resolved = resolve(&absolute);
        let mut own = self.0.write();
        for p in [absolute, resolved] {
            if !own.contains(&p) {
                own.push(p);
            }
        }
    }

    /// Whether `path`, found at `relative` under a root whose resolved form is `root`, is one
    /// of the own files.
    pub(crate) fn contains(&self, path: &Path, root: Option<&Path>, relative: &Path) -> bool {
        self.0.read().iter().any(|own| {
            own == path
                || root.is_some_and(|root| own.strip_prefix(root).is_ok_and(|r| r == relative))
        })
    }
}

/// `path` with symbolic links resolved; for a file that does not exist (yet), its folder
/// resolved and its name kept; `path` itself when not even the folder resolves.
fn resolve(path: &Path) -> PathBuf {
    if let Ok(resolved) = fs::canonicalize(path) {
        return resolved;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => fs::canonicalize(parent)
            .map(|p| p.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}
