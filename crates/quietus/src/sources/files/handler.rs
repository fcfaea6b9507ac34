//! What `notify`'s event handler does with an event ([`EventHandler`]), and which of its
//! errors say the system is out of watches ([`is_out_of_watches`]).

use std::fs;
use std::path::Path;

use notify::EventKind;
use notify::event::CreateKind;

use super::classes::{Place, is_progress};
use super::common::{Common, Msg};
use crate::activity::ActivitySource;

/// Whether a `notify` error says the system is out of watches or watcher instances.
pub(super) fn is_out_of_watches(error: &notify::Error) -> bool {
    match &error.kind {
        notify::ErrorKind::MaxFilesWatch => true,
        notify::ErrorKind::Io(e) => e
            .raw_os_error()
            .is_some_and(crate::process::sys::is_watch_limit_error),
        _ => false,
    }
}

/// What `notify`'s event handler does with an event: stamps the board when a path that counts
/// changed; asks the tracker's thread to re-arm when a root (or a folder above one) appeared,
/// vanished or changed kind, to try again a folder that could not be watched, or to fall back
/// to the stat scan when the system is out of watches.
pub(super) struct EventHandler {
    pub(super) common: Common,
}

impl EventHandler {
    pub(super) fn handle(&self, result: &notify::Result<notify::Event>) {
        match result {
            Ok(event) => self.on_event(event),
            Err(error) if is_out_of_watches(error) => self.common.poster.post(Msg::FallBack),
            Err(error) => log::debug!("file watcher: {error}"),
        }
    }

    fn on_event(&self, event: &notify::Event) {
        let mut counted = event.need_rescan();
        let mut rearm = false;
        if is_progress(&event.kind) {
            for path in &event.paths {
                match self.common.filter.place(path) {
                    Place::Inside(counts) => {
                        if self.common.filter.roots.iter().any(|r| r == path) {
                            // The root itself appeared, vanished or changed kind: the re-arm
                            // decides (and stamps a real change); a root that is a file being
                            // written is not activity.
                            rearm = true;
                        } else {
                            counted |= counts;
                            if self.to_retry(&event.kind, path) {
                                self.common.poster.post(Msg::Retry(path.clone()));
                            }
                        }
                    }
                    Place::AboveRoot => rearm = true,
                    Place::Elsewhere => {}
                }
            }
        }
        if counted {
            self.common.board.stamp(&ActivitySource::Files);
        }
        if rearm {
            self.common.poster.post(Msg::Rearm);
        }
    }

    /// Whether `path` inside a root is to be tried (again): a folder that could not be watched
    /// changed (its mode, say); a new folder came that notify could not watch (it says nothing
    /// then), or that nothing watches for it (its parent is watched alone, around a folder of
    /// another filesystem).
    fn to_retry(&self, kind: &EventKind, path: &Path) -> bool {
        match kind {
            EventKind::Create(CreateKind::Folder) => {
                fs::read_dir(path).is_err()
                    || path
                        .parent()
                        .is_some_and(|p| self.common.filter.is_around(p))
            }
            EventKind::Modify(_) => self.common.gaps.is_open(path),
            _ => false,
        }
    }
}
