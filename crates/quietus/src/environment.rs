//! Environment isolation for the child: an empty environment plus an allowlist, overlays, and
//! an isolated home folder optionally seeded with copies of named files.

use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::error::{ConfigError, SpawnError, SpawnErrorKind};

/// The child's environment: what it inherits, what is set on top, and an optional isolated
/// home. Given to [`SessionBuilder::environment`](crate::SessionBuilder::environment).
///
/// The child's environment is built in this order, a later step winning over an earlier one:
///
/// 1. the parent's environment ([`Environment::inherit_all`], the default), or only its
///    variables on the allowlist ([`Environment::empty`] + [`inherit`](Self::inherit));
/// 2. the variables set or removed on the [`Command`] itself (`command.env(…)`), which are
///    always kept;
/// 3. the isolated home's `HOME` and `XDG_*_HOME` ([`home`](Self::home));
/// 4. the overlays ([`set`](Self::set)).
///
/// ```
/// use quietus::Environment;
///
/// let env = Environment::empty()
///     .inherit("PATH")
///     .inherit("LANG")
///     .set("NO_COLOR", "1")
///     .home("/tmp/agent-home")
///     .seed("/etc/hostname", "etc/hostname");
/// # let _ = env;
/// ```
#[derive(Debug, Clone, Default)]
pub struct Environment {
    clear: bool,
    inherit: Vec<OsString>,
    overlays: Vec<(OsString, OsString)>,
    home: Option<PathBuf>,
    seeds: Vec<(PathBuf, PathBuf)>,
}

/// What the isolated home looked like at the spawn: where it is, which files were seeded and
/// which could not be. In [`MonitorResult::home`](crate::MonitorResult::home).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IsolatedHome {
    /// The home folder (absolute), the child's `HOME`.
    pub root: PathBuf,
    /// The files copied into it, as their destination paths.
    pub seeded: Vec<PathBuf>,
    /// The files [`Environment::seed`] could not copy (the child was started all the same):
    /// where each should have gone (inside the home), and why (`No such file or directory (os
    /// error 2)`).
    pub failed: Vec<(PathBuf, crate::error::SystemError)>,
}

impl Environment {
    /// The parent's whole environment (the default; what a plain [`Command`] does).
    pub fn inherit_all() -> Self {
        Self::default()
    }

    /// No inherited variable at all, except those named with [`inherit`](Self::inherit) (and
    /// those set on the command itself). Name `PATH` to find programs by name.
    pub fn empty() -> Self {
        Self {
            clear: true,
            ..Self::default()
        }
    }

    /// Adds `name` to the allowlist: the child inherits it when the parent has it. Only
    /// meaningful after [`empty`](Self::empty) (otherwise everything is inherited).
    pub fn inherit(mut self, name: impl AsRef<OsStr>) -> Self {
        self.inherit.push(name.as_ref().to_owned());
        self
    }

    /// Sets `name` to `value` in the child, over anything inherited or set before (the
    /// isolated home's variables included).
    pub fn set(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.overlays
            .push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// An isolated home in `dir`: `HOME=<dir>`, `XDG_CONFIG_HOME=<dir>/.config`,
    /// `XDG_DATA_HOME=<dir>/.local/share`, `XDG_STATE_HOME=<dir>/.local/state`,
    /// `XDG_CACHE_HOME=<dir>/.cache`. The folders are created at the spawn when missing (mode
    /// 0700); a relative `dir` is taken from the parent's working directory. A folder that
    /// cannot be created fails the spawn ([`SpawnErrorKind::Home`]).
    pub fn home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.home = Some(dir.into());
        self
    }

    /// Copies `source` to `destination` (a path relative to the isolated home, without `..`)
    /// at the spawn: a credentials file, a CLI's config. The copy gets mode 0600, its folders
    /// are created (0700), an existing file is replaced (never through a symlink). A copy that
    /// fails is recorded in [`IsolatedHome::failed`] and does not stop the spawn. Needs
    /// [`home`](Self::home) (without it the spawn fails:
    /// [`SpawnErrorKind::Config`]).
    pub fn seed(mut self, source: impl Into<PathBuf>, destination: impl Into<PathBuf>) -> Self {
        self.seeds.push((source.into(), destination.into()));
        self
    }

    /// Whether the child's environment starts empty (only the inherited names and the
    /// command's own variables), not from this process's.
    pub(crate) fn clears(&self) -> bool {
        self.clear
    }

    /// Applies the environment to `command`: builds the variables, prepares the home. A
    /// [`SpawnError`]: `Config` for seeds without a home, `Home` for a home that cannot be
    /// made.
    pub(crate) fn apply(&self, command: &mut Command) -> Result<Option<IsolatedHome>, SpawnError> {
        if self.home.is_none() && !self.seeds.is_empty() {
            return Err(SpawnError::config(ConfigError::SeedWithoutHome));
        }
        if self.clear {
            // `env_clear` also forgets what was set on the command: keep those.
            let explicit: Vec<(OsString, Option<OsString>)> = command
                .get_envs()
                .map(|(k, v)| (k.to_owned(), v.map(OsStr::to_owned)))
                .collect();
            command.env_clear();
            for name in &self.inherit {
                if let Some(value) = std::env::var_os(name) {
                    command.env(name, value);
                }
            }
            for (name, value) in explicit {
                match value {
                    Some(value) => command.env(name, value),
                    None => command.env_remove(name),
                };
            }
        }
        let report = match &self.home {
            Some(dir) => {
                let report = prepare_home(dir, &self.seeds)?;
                let root = &report.root;
                command
                    .env("HOME", root)
                    .env("XDG_CONFIG_HOME", root.join(".config"))
                    .env("XDG_DATA_HOME", root.join(".local/share"))
                    .env("XDG_STATE_HOME", root.join(".local/state"))
                    .env("XDG_CACHE_HOME", root.join(".cache"));
                Some(report)
            }
            None => None,
        };
        for (name, value) in &self.overlays {
            command.env(name, value);
        }
        Ok(report)
    }
}

/// The folders of an isolated home, relative to it.
const HOME_FOLDERS: [&str; 5] = ["", ".config", ".local/share", ".local/state", ".cache"];

/// Creates the home and its XDG folders; seeds the files.
fn prepare_home(dir: &Path, seeds: &[(PathBuf, PathBuf)]) -> Result<IsolatedHome, SpawnError> {
    let root = std::path::absolute(dir).map_err(|e| {
        SpawnError::new(
            SpawnErrorKind::Home,
            format_args!("isolated home {}: cannot resolve it", dir.display()),
            e,
        )
    })?;
    for folder in HOME_FOLDERS {
        let path = if folder.is_empty() {
            root.clone()
        } else {
            root.join(folder)
        };
        create_private_dir(&path).map_err(|e| {
            SpawnError::new(
                SpawnErrorKind::Home,
                format_args!("isolated home folder {}", path.display()),
                e,
            )
        })?;
    }
    let mut report = IsolatedHome {
        root: root.clone(),
        seeded: Vec::new(),
        failed: Vec::new(),
    };
    for (source, relative) in seeds {
        let destination = root.join(relative);
        match seed_file(&root, source, relative, &destination) {
            Ok(()) => report.seeded.push(destination),
            Err(e) => {
                log::warn!(
                    "cannot seed {} into the isolated home as {}: {e}",
                    source.display(),
                    destination.display()
                );
                report.failed.push((destination, e.into()));
            }
        }
    }
    Ok(report)
}

/// Creates `path` and its missing parents with mode 0700; an existing folder is left as it is.
fn create_private_dir(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    DirBuilder::new().recursive(true).mode(0o700).create(path)?;
    // The mode asked for is filtered by the umask: make it exact.
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
    if !path.is_dir() {
        return Err(io::Error::new(io::ErrorKind::NotADirectory, "not a folder"));
    }
    Ok(())
}

/// Copies `source` to `destination` (= `root` / `relative`) with mode 0600.
fn seed_file(root: &Path, source: &Path, relative: &Path, destination: &Path) -> io::Result<()> {
    let inside = !relative.as_os_str().is_empty()
        && relative
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the destination must be a relative path inside the home, without `..`",
        ));
    }
    let mut input = File::open(source)?;
    if let Some(parent) = destination.parent()
        && parent != root
    {
        create_private_dir(parent)?;
    }
    let mut output = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(crate::process::sys::O_NOFOLLOW)
        .open(destination)?;
    // An existing file keeps its mode through `open`: make it exact.
    output.set_permissions(fs::Permissions::from_mode(0o600))?;
    io::copy(&mut input, &mut output)?;
    Ok(())
}

/// Whether git's ssh command is the user's own for `command` (its environment once
/// [`Environment::apply`] is done, `cleared` when it started empty; its working directory):
/// `GIT_SSH_COMMAND` or `GIT_SSH` is in it, or git's `core.sshCommand` is configured there
/// (`git config --get core.sshCommand`, run in the child's working directory with the child's
/// environment; no git, or a failing one, counts as not configured). The non-interactive
/// profile then leaves `GIT_SSH_COMMAND` unset: git prefers it to both, and a deploy key's
/// `git push` would silently lose its own ssh command.
pub(crate) fn has_own_ssh_command(command: &Command, cleared: bool) -> bool {
    let in_env = |name: &str| match command.get_envs().find(|(k, _)| *k == name) {
        Some((_, value)) => value.is_some(),
        None => !cleared && std::env::var_os(name).is_some(),
    };
    if in_env("GIT_SSH_COMMAND") || in_env("GIT_SSH") {
        return true;
    }
    let mut git = Command::new("git");
    git.args(["config", "--get", "core.sshCommand"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if cleared {
        git.env_clear();
    }
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => git.env(key, value),
            None => git.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        git.current_dir(dir);
    }
    // The library's own child: no session takes it for an orphan.
    let gate = crate::process::orphans::spawn_gate();
    let child = git.spawn();
    if let Ok(child) = &child {
        crate::process::orphans::spawned(crate::pid::Pid::of(child));
    }
    drop(gate);
    let Ok(child) = child else {
        return false;
    };
    let pid = crate::pid::Pid::of(&child);
    let output = child.wait_with_output();
    crate::process::orphans::reaped(pid);
    output.is_ok_and(|o| o.status.success() && !o.stdout.trim_ascii().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inherit_all_changes_nothing() {
        let mut command = Command::new("true");
        command.env("OWN", "1");
        assert!(
            Environment::inherit_all()
                .apply(&mut command)
                .unwrap()
                .is_none()
        );
        assert_eq!(command.get_envs().count(), 1);
        let seeds_without_home = Environment::empty().seed("/etc/hostname", "h");
        let error = seeds_without_home.apply(&mut command).unwrap_err();
        assert_eq!(error.io_error_kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn empty_keeps_the_allowlist_and_the_command_s_own_variables() {
        let mut command = Command::new("true");
        command.env("OWN", "1").env_remove("PATH");
        let report = Environment::empty()
            .inherit("PATH")
            .set("EXTRA", "2")
            .apply(&mut command)
            .unwrap();
        assert!(report.is_none());
        let envs: Vec<_> = command
            .get_envs()
            .map(|(k, v)| (k.to_owned(), v.map(OsStr::to_owned)))
            .collect();
        assert!(envs.contains(&("OWN".into(), Some("1".into()))));
        assert!(envs.contains(&("EXTRA".into(), Some("2".into()))));
        // Removed on the command: stays removed although on the allowlist.
        assert!(
            !envs.iter().any(|(k, v)| k == "PATH" && v.is_some()),
            "{envs:?}"
        );
    }

    #[test]
    fn seeds_never_escape_the_home() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("s");
        fs::write(&source, "x").unwrap();
        let home = dir.path().join("home");
        let report = prepare_home(
            &home,
            &[
                (source.clone(), PathBuf::from("../escaped")),
                (source.clone(), PathBuf::from("/etc/abs")),
                (source.clone(), PathBuf::from("")),
                (source.clone(), PathBuf::from("ok/inside")),
            ],
        )
        .unwrap();
        assert_eq!(report.seeded, vec![home.join("ok/inside")]);
        assert_eq!(report.failed.len(), 3, "{report:#?}");
        assert!(!dir.path().join("escaped").exists());
    }
}
