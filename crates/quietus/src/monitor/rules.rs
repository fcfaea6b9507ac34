//! The monitor's side of the rules beyond the idle timeout: completion (seen on a reader
//! thread or in a completion file) and its linger, the solo caps, the probes.

use std::time::{Duration, Instant};

use crate::activity::ActivitySource;
use crate::completion::FileWatch;
use crate::config::MonitorConfig;
use crate::outcome::CompletionSeen;
use crate::sources::probes::Prober;
use crate::verdict::{self, Limits, ProbeStep};

/// Completion files are looked at every check interval, at most every second.
const FILE_LOOK_MAX: Duration = Duration::from_secs(1);

pub(super) struct Rules {
    /// The solo caps in force.
    pub(super) caps: Vec<(ActivitySource, Duration)>,
    /// Completion, once seen.
    pub(super) completion: Option<CompletionSeen>,
    linger: Duration,
    /// The completion files, until completion is seen.
    files: Option<FileWatch>,
    file_look: Duration,
    next_file_look: Instant,
    pub(super) prober: Prober,
}

impl Rules {
    pub(super) fn new(
        id: u64,
        config: &MonitorConfig,
        files: Option<FileWatch>,
        now: Instant,
    ) -> Self {
        let file_look = config.effective_check_interval().min(FILE_LOOK_MAX);
        Self {
            caps: config.effective_caps(),
            completion: None,
            linger: config.completion.linger,
            files,
            file_look,
            next_file_look: now + file_look,
            prober: Prober::new(id, &config.probes),
        }
    }

    /// Looks at `files` (as they were before the spawn) for completion.
    pub(super) fn watch_completion_files(&mut self, files: Option<FileWatch>) {
        self.files = files;
    }

    /// Follows a new check interval: the completion files are looked at on it (at most every
    /// second), from `now` at the latest.
    pub(super) fn set_check_interval(&mut self, interval: Duration, now: Instant) {
        self.file_look = interval.min(FILE_LOOK_MAX);
        self.next_file_look = self.next_file_look.min(now + self.file_look);
    }

    /// The verdict's limits.
    pub(super) fn limits(
        &self,
        idle_timeout: Duration,
        hard_deadline: Option<Instant>,
        origin: Instant,
    ) -> Limits<'_> {
        Limits {
            idle_timeout,
            hard_deadline,
            caps: &self.caps,
            linger_until: self
                .completion
                .as_ref()
                .map(|seen| origin + seen.after() + self.linger),
        }
    }

    /// Records completion (the first one seen); returns whether it is new.
    pub(super) fn seen(&mut self, seen: CompletionSeen) -> bool {
        if self.completion.is_some() {
            return false;
        }
        self.completion = Some(seen);
        self.files = None;
        true
    }

    /// Looks at the completion files when due; returns completion when one changed, and the
    /// next look's instant.
    pub(super) fn look_at_files(
        &mut self,
        now: Instant,
        origin: Instant,
    ) -> (Option<CompletionSeen>, Option<Instant>) {
        let Some(files) = &self.files else {
            return (None, None);
        };
        if now < self.next_file_look {
            return (None, Some(self.next_file_look));
        }
        self.next_file_look = now + self.file_look;
        let seen = files.changed().map(|path| CompletionSeen::File {
            path: path.to_path_buf(),
            after: now.saturating_duration_since(origin),
        });
        (seen, Some(self.next_file_look))
    }

    /// The probes to ask at a stale decision (not the capped ones), and whether one of them
    /// still holds a recent yes.
    pub(super) fn probes_to_ask(
        &self,
        capped: &[ActivitySource],
        now: Instant,
        interval: Duration,
    ) -> (Vec<ActivitySource>, Vec<ActivitySource>) {
        let mut ask = Vec::new();
        let mut still = Vec::new();
        for (source, last_yes) in self.prober.states() {
            match verdict::probe_step(last_yes, capped.contains(&source), now, interval) {
                ProbeStep::Ask => ask.push(source),
                ProbeStep::StillYes => still.push(source),
                ProbeStep::Skip => {}
            }
        }
        (ask, still)
    }
}
