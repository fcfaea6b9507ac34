//! Reaping adopted zombies, for quietus as a container's first process (pid 1) or as a child
//! subreaper: the kernel hands orphaned descendants to such a process, and their zombies stay
//! until it reaps them.
//!
//! The library reaps the supervised child itself (`Child::wait`, after watching it with
//! `waitid(WNOWAIT)`), so this module never calls `waitpid(-1)`, which could steal that child's
//! status: it lists this process's children in `/proc`, and reaps by pid only the zombies the
//! caller allows (every one but the supervised child while the session runs).

use quietus::Pid;

/// Whether orphaned processes can be handed to this process: it is process 1 of its pid
/// namespace, or (Linux) a child subreaper.
pub(crate) fn adopts_orphans() -> bool {
    if Pid::current().get() == 1 {
        return true;
    }
    crate::sys::is_child_subreaper()
}

/// Reaps every zombie child of this process whose pid `may_reap` accepts; returns their pids.
///
/// Linux only (elsewhere it reaps nothing). Never waits: a child that is not a zombie yet is
/// left for the next call.
pub(crate) fn reap_zombies(may_reap: impl Fn(Pid) -> bool) -> Vec<Pid> {
    #[cfg(target_os = "linux")]
    return reap_zombies_among(own_children(), may_reap);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = may_reap;
        Vec::new()
    }
}

/// [`reap_zombies`] among `children`.
#[cfg(target_os = "linux")]
fn reap_zombies_among(children: Vec<Pid>, may_reap: impl Fn(Pid) -> bool) -> Vec<Pid> {
    let mut reaped = Vec::new();
    for pid in children {
        if !may_reap(pid) || !linux::is_zombie(pid) {
            continue;
        }
        // By pid, never -1: only this zombie, which is ours and stays ours until reaped here.
        match crate::sys::reap_if_zombie(pid) {
            Ok(true) => reaped.push(pid),
            Ok(false) => {}
            Err(e) => log::debug!("reaping adopted pid {pid}: {e}"),
        }
    }
    reaped
}

/// The pids of this process's children where orphans go (zombies included): the kernel hands
/// an orphan to the first live thread of its reaper, the main thread while it lives, so only
/// its list is read (every thread's once it has exited). The library's children forked on
/// other threads (the program, its guardian) are the library's to reap.
///
/// Only that list, because looking up another thread's `/proc/self/task/<tid>` leaves entries
/// the kernel must drop when the thread exits; at the end of a run that races with the parent's
/// reap of quietus, whose `wait` then spins in the kernel (7–10 ms median under load).
#[cfg(target_os = "linux")]
pub(crate) fn own_children() -> Vec<Pid> {
    let main = Pid::current();
    if !linux::is_zombie(main)
        && let Some(children) = linux::children_of_task(main)
    {
        return children;
    }
    linux::children_from_tasks().unwrap_or_else(linux::children_from_scan)
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs;

    use quietus::Pid;

    /// The pids in a `/proc` list (`children`: numbers separated by spaces).
    fn pids(text: &str) -> impl Iterator<Item = Pid> + '_ {
        text.split_ascii_whitespace()
            .filter_map(|p| Pid::new(p.parse().ok()?))
    }

    /// The children thread `tid` of this process forked or was handed, from
    /// `/proc/self/task/<tid>/children`; `None` when the kernel does not offer the file.
    pub(super) fn children_of_task(tid: Pid) -> Option<Vec<Pid>> {
        let text = fs::read_to_string(format!("/proc/self/task/{tid}/children")).ok()?;
        Some(pids(&text).collect())
    }

    /// From `/proc/self/task/<tid>/children` of every thread (an adopted orphan may be listed
    /// under any of them once the main thread has exited). `None` when the kernel does not
    /// offer those files.
    pub(super) fn children_from_tasks() -> Option<Vec<Pid>> {
        let mut children = Vec::new();
        let mut offered = false;
        for task in fs::read_dir("/proc/self/task").ok()?.flatten() {
            let Ok(text) = fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            offered = true;
            children.extend(pids(&text));
        }
        offered.then_some(children)
    }

    /// From a scan of `/proc/<pid>/stat` for our pid as the parent (kernels without the
    /// `children` files).
    pub(super) fn children_from_scan() -> Vec<Pid> {
        let own = Pid::current();
        let Ok(dir) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| pids(e.file_name().to_str()?).next())
            .filter(|pid| stat(*pid).is_some_and(|(_, ppid)| ppid == Some(own)))
            .collect()
    }

    /// State letter and parent pid from `/proc/<pid>/stat` (no parent: one outside this pid
    /// namespace).
    fn stat(pid: Pid) -> Option<(u8, Option<Pid>)> {
        let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = text.get(text.rfind(')')? + 1..)?;
        let mut fields = rest.split_ascii_whitespace();
        let state = *fields.next()?.as_bytes().first()?;
        let ppid = Pid::new(fields.next()?.parse().ok()?);
        Some((state, ppid))
    }

    pub(super) fn is_zombie(pid: Pid) -> bool {
        stat(pid).is_some_and(|(state, _)| state == b'Z')
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// Polls until `pid` is a zombie (bounded).
    fn wait_zombie(pid: Pid) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !linux::is_zombie(pid) {
            assert!(Instant::now() < deadline, "pid {pid} never became a zombie");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Two children of this test process exit and become zombies; one plays the supervised
    /// child. Only the other one is reaped, and the "supervised" one's status is still there
    /// for `Child::wait`. (Other tests in this binary start no process, and the filter only
    /// accepts this test's own pids anyway.)
    #[test]
    fn reaps_only_the_zombies_it_is_allowed_to() {
        let mut adopted = Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .expect("sh runs");
        let mut supervised = Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .expect("sh runs");
        let (a, s) = (Pid::of(&adopted), Pid::of(&supervised));
        wait_zombie(a);
        wait_zombie(s);
        // Forked on this test thread, they are in its list (orphans would be in the main
        // thread's, which `reap_zombies` reads).
        let mine = || linux::children_of_task(this_thread()).expect("the children file");
        let children = mine();
        assert!(
            children.contains(&a) && children.contains(&s),
            "{children:?}"
        );

        // The production filter is "not the supervised child"; here also "one of this test's".
        let ours = [a, s];
        let reaped = reap_zombies_among(mine(), |pid| ours.contains(&pid) && pid != s);
        assert_eq!(reaped, vec![a]);
        assert!(!mine().contains(&a), "the adopted zombie is gone");
        assert!(linux::is_zombie(s), "the supervised child was left alone");
        // Its status was not stolen.
        let status = supervised.wait().expect("still ours to wait for");
        assert_eq!(status.code(), Some(3));
        // The reaped one is no longer waitable: its status went to the reaper.
        assert!(adopted.wait().is_err());
        // Nothing left: a second sweep finds nothing.
        assert!(reap_zombies_among(mine(), |pid| ours.contains(&pid)).is_empty());
    }

    /// This thread's id.
    fn this_thread() -> Pid {
        crate::sys::current_thread()
    }

    #[test]
    fn only_the_main_thread_s_children_are_looked_at() {
        // A child of this (non-main) test thread is not where orphans go: not listed.
        assert_ne!(
            this_thread(),
            Pid::current(),
            "tests run off the main thread"
        );
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = Pid::of(&child);
        let listed = own_children().contains(&pid);
        let in_mine = linux::children_of_task(this_thread()).map(|c| c.contains(&pid));
        child.kill().expect("our own sleep");
        child.wait().expect("reaped");
        assert_eq!(
            in_mine,
            Some(true),
            "the kernel lists it under the forking thread"
        );
        assert!(!listed, "another thread's children were looked at");
    }

    #[test]
    fn a_running_child_is_not_reaped() {
        let mut running = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = Pid::of(&running);
        assert!(reap_zombies(|p| p == pid).is_empty());
        running.kill().expect("our own sleep");
        let status = running.wait().expect("ours");
        assert!(!status.success());
    }

    #[test]
    fn not_an_orphan_adopter_in_tests() {
        // cargo's test process is neither pid 1 nor (normally) a subreaper.
        if std::process::id() != 1 {
            assert_eq!(adopts_orphans(), crate::sys::is_child_subreaper());
        }
    }
}
