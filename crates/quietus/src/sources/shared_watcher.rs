//! One `notify` watcher for every file tracker of the same roots in the process: a server's
//! sessions started in the same folder watch the same `.agent/`, and each would otherwise
//! hold an inotify instance of its own (three descriptors with `notify`'s event loop, and a
//! thread). Each tracker holds a [`SharedWatcher`]: the instance's events go to every holder's
//! handler (each classifies the paths as before), and a path stays watched while one holder
//! wants it, recursively if one wants it so.
//!
//! Only trackers of exactly the same roots share an instance: their watches are on the same
//! paths, so one holder's recursive watch never meets another's watch of a folder below it
//! (`notify` keeps one mode per path, and removes a recursive watch with every watch below).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use notify::{RecursiveMode, Watcher};

use crate::sync::{Mutex, RwLock};

/// A holder's event handler.
type Handler = Arc<dyn Fn(&notify::Result<notify::Event>) + Send + Sync>;

/// The instances alive, by the roots they serve.
static INSTANCES: Mutex<Vec<(Vec<PathBuf>, Weak<Instance>)>> = Mutex::new(Vec::new());

/// Holders' numbers.
static NEXT_HOLDER: AtomicU64 = AtomicU64::new(1);

/// One `notify` watcher and who holds which of its paths.
struct Instance {
    watcher: Mutex<notify::RecommendedWatcher>,
    /// Per path, its holders and the mode each wants.
    held: Mutex<HashMap<PathBuf, Vec<(u64, RecursiveMode)>>>,
    handlers: Arc<RwLock<Vec<(u64, Handler)>>>,
}

/// One tracker's hold on the watcher of its roots.
pub(crate) struct SharedWatcher {
    instance: Arc<Instance>,
    holder: u64,
}

impl SharedWatcher {
    /// A hold on the watcher of `roots` (made now if none is alive), whose events go to
    /// `handler` until the hold is dropped.
    pub(crate) fn new(
        roots: &[PathBuf],
        handler: impl Fn(&notify::Result<notify::Event>) + Send + Sync + 'static,
    ) -> notify::Result<SharedWatcher> {
        let holder = NEXT_HOLDER.fetch_add(1, Ordering::Relaxed);
        let mut instances = INSTANCES.lock();
        instances.retain(|(_, instance)| instance.strong_count() > 0);
        let alive = instances
            .iter()
            .find(|(served, _)| served == roots)
            .and_then(|(_, instance)| instance.upgrade());
        let instance = match alive {
            Some(instance) => instance,
            None => {
                let instance = Arc::new(Instance::new()?);
                instances.push((roots.to_vec(), Arc::downgrade(&instance)));
                instance
            }
        };
        drop(instances);
        instance.handlers.write().push((holder, Arc::new(handler)));
        Ok(SharedWatcher { instance, holder })
    }

    /// Watches `path` for this holder (again: a folder made anew under the same path needs a
    /// new watch, whoever else holds it), recursively if this holder or another wants it so.
    pub(crate) fn watch(&mut self, path: &Path, mode: RecursiveMode) -> notify::Result<()> {
        let mut held = self.instance.held.lock();
        let holders = held.entry(path.to_path_buf()).or_default();
        holders.retain(|(holder, _)| *holder != self.holder);
        holders.push((self.holder, mode));
        let effective = if holders.iter().any(|(_, m)| *m == RecursiveMode::Recursive) {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        let watched = self.instance.watcher.lock().watch(path, effective);
        if watched.is_err() {
            self.release(&mut held, path);
        }
        watched
    }

    /// Lets go of `path` for this holder: unwatched once no holder wants it.
    pub(crate) fn unwatch(&mut self, path: &Path) -> notify::Result<()> {
        let mut held = self.instance.held.lock();
        if self.release(&mut held, path) {
            return self.instance.watcher.lock().unwatch(path);
        }
        Ok(())
    }

    /// Drops this holder's hold of `path`; says whether nobody holds it any more (and it was
    /// held).
    fn release(&self, held: &mut HashMap<PathBuf, Vec<(u64, RecursiveMode)>>, path: &Path) -> bool {
        let Some(holders) = held.get_mut(path) else {
            return false;
        };
        let before = holders.len();
        holders.retain(|(holder, _)| *holder != self.holder);
        let mine = holders.len() != before;
        if holders.is_empty() {
            held.remove(path);
        }
        mine && !held.contains_key(path)
    }
}

impl Drop for SharedWatcher {
    fn drop(&mut self) {
        self.instance
            .handlers
            .write()
            .retain(|(holder, _)| *holder != self.holder);
        let mut held = self.instance.held.lock();
        let mine: Vec<PathBuf> = held
            .iter()
            .filter(|(_, holders)| holders.iter().any(|(h, _)| *h == self.holder))
            .map(|(path, _)| path.clone())
            .collect();
        for path in mine {
            if self.release(&mut held, &path) {
                let _ = self.instance.watcher.lock().unwatch(&path);
            }
        }
    }
}

impl Instance {
    fn new() -> notify::Result<Instance> {
        let handlers: Arc<RwLock<Vec<(u64, Handler)>>> = Arc::default();
        let to = handlers.clone();
        let dispatch = move |result: notify::Result<notify::Event>| {
            for (_, handler) in to.read().iter() {
                handler(&result);
            }
        };
        let config = notify::Config::default().with_follow_symlinks(false);
        let watcher = notify::RecommendedWatcher::new(dispatch, config)?;
        // `notify` starts its event loop's thread inside `new` and ignores a failure to (a
        // process limit): its loop, with our `dispatch`, is then dropped at once, and the
        // watcher's first `watch` and its `drop` would panic on the channel to it (issue 51
        // item 1). The loop owns `dispatch`, so `handlers` held by us alone says it.
        if Arc::strong_count(&handlers) == 1 {
            // Its drop would panic: it is let go of (one descriptor, its waker's).
            std::mem::forget(watcher);
            let why = "cannot start the file watcher's thread (notify's event loop)";
            let error = std::io::Error::new(std::io::ErrorKind::WouldBlock, why);
            return Err(notify::Error::io(error));
        }
        Ok(Instance {
            watcher: Mutex::new(watcher),
            held: Mutex::new(HashMap::new()),
            handlers,
        })
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A holder whose handler counts the events about a file named `one`.
    fn holder(roots: &[PathBuf]) -> (SharedWatcher, Arc<AtomicUsize>) {
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        let watcher = SharedWatcher::new(roots, move |event| {
            let about_one = event.as_ref().is_ok_and(|event| {
                event
                    .paths
                    .iter()
                    .any(|p| p.file_name() == Some("one".as_ref()))
            });
            if about_one {
                count.fetch_add(1, Ordering::SeqCst);
            }
        })
        .expect("a watcher");
        (watcher, seen)
    }

    use crate::clock::eventually;

    #[test]
    fn trackers_of_the_same_roots_share_one_instance_and_keep_each_others_watches() {
        let dir = tempfile::tempdir().unwrap();
        let roots = vec![dir.path().to_path_buf()];
        let (mut a, _) = holder(&roots);
        let (mut b, seen_by_b) = holder(&roots);
        assert!(Arc::ptr_eq(&a.instance, &b.instance), "one instance");
        let other = tempfile::tempdir().unwrap();
        let (c, _) = holder(&[other.path().to_path_buf()]);
        assert!(
            !Arc::ptr_eq(&a.instance, &c.instance),
            "other roots, another"
        );
        a.watch(dir.path(), RecursiveMode::Recursive).unwrap();
        b.watch(dir.path(), RecursiveMode::NonRecursive).unwrap();
        // One holder lets go: the other still sees the folder's changes.
        a.unwatch(dir.path()).unwrap();
        std::fs::write(dir.path().join("one"), b"1").unwrap();
        assert!(eventually(|| seen_by_b.load(Ordering::SeqCst) > 0));
        // The last holder gone, the path is unwatched: held by nobody.
        drop(b);
        assert!(a.instance.held.lock().is_empty());
        drop(a);
        assert_eq!(Arc::strong_count(&c.instance), 1);
    }
}
