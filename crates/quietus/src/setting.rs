//! [`Setting`]: the name of each setting of the configuration, as a type, so that an error
//! ([`ConfigError::setting`](crate::ConfigError::setting)) names its setting without a string
//! a client would have to match.

use std::fmt;

/// One setting of a [`MonitorConfig`](crate::MonitorConfig) (or of the
/// [`SessionBuilder`](crate::SessionBuilder)), as a [`ConfigError`](crate::ConfigError) names
/// it. Its [`Display`](fmt::Display) is its path in the configuration (`idle_timeout`,
/// `files.exclude`, `kill_ladder.grace`): the setter that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Setting {
    /// [`MonitorConfigBuilder::idle_timeout`](crate::config::MonitorConfigBuilder::idle_timeout).
    IdleTimeout,
    /// [`MonitorConfigBuilder::hard_timeout`](crate::config::MonitorConfigBuilder::hard_timeout).
    HardTimeout,
    /// [`MonitorConfigBuilder::input_wait_timeout`](crate::config::MonitorConfigBuilder::input_wait_timeout).
    InputWaitTimeout,
    /// [`MonitorConfigBuilder::input_wait_notice`](crate::config::MonitorConfigBuilder::input_wait_notice).
    InputWaitNotice,
    /// [`MonitorConfigBuilder::kill_ladder`](crate::config::MonitorConfigBuilder::kill_ladder) as a whole (its steps).
    KillLadder,
    /// The grace of a step of the [`KillLadder`](crate::KillLadder).
    KillLadderGrace,
    /// [`MonitorConfigBuilder::check_interval`](crate::config::MonitorConfigBuilder::check_interval).
    CheckInterval,
    /// [`MonitorConfigBuilder::drain_cap`](crate::config::MonitorConfigBuilder::drain_cap).
    DrainCap,
    /// [`MonitorConfigBuilder::drain_quiet`](crate::config::MonitorConfigBuilder::drain_quiet).
    DrainQuiet,
    /// [`MonitorConfigBuilder::kill_confirm_timeout`](crate::config::MonitorConfigBuilder::kill_confirm_timeout).
    KillConfirmTimeout,
    /// [`FileWatchConfigBuilder::include`](crate::config::FileWatchConfigBuilder::include).
    FilesInclude,
    /// [`FileWatchConfigBuilder::exclude`](crate::config::FileWatchConfigBuilder::exclude).
    FilesExclude,
    /// [`FileWatchConfigBuilder::arm_delay`](crate::config::FileWatchConfigBuilder::arm_delay).
    FilesArmDelay,
    /// [`ChildWatchConfigBuilder::cpu_threshold`](crate::config::ChildWatchConfigBuilder::cpu_threshold).
    ChildrenCpuThreshold,
    /// [`CaptureConfigBuilder::cap_per_stream`](crate::config::CaptureConfigBuilder::cap_per_stream).
    CaptureCapPerStream,
    /// [`EventConfigBuilder::throttle`](crate::config::EventConfigBuilder::throttle).
    EventsThrottle,
    /// [`EventConfigBuilder::chunk_cap`](crate::config::EventConfigBuilder::chunk_cap).
    EventsChunkCap,
    /// [`EventConfigBuilder::capacity`](crate::config::EventConfigBuilder::capacity).
    EventsCapacity,
    /// [`EventConfigBuilder::idle_warning`](crate::config::EventConfigBuilder::idle_warning).
    EventsIdleWarning,
    /// [`MonitorConfigBuilder::solo_cap`](crate::config::MonitorConfigBuilder::solo_cap).
    SoloCap,
    /// [`MonitorConfigBuilder::probe`](crate::config::MonitorConfigBuilder::probe): the probes.
    Probes,
    /// [`CompletionConfigBuilder::output`](crate::config::CompletionConfigBuilder::output).
    CompletionOutput,
    /// [`CompletionConfigBuilder::file`](crate::config::CompletionConfigBuilder::file).
    CompletionFiles,
    /// [`CompletionConfigBuilder::linger`](crate::config::CompletionConfigBuilder::linger).
    CompletionLinger,
    /// The terminal's size ([`SessionBuilder::pty`](crate::SessionBuilder::pty)).
    PtySize,
}

impl Setting {
    /// Every setting, in declaration order.
    pub const ALL: &'static [Setting] = &[
        Setting::IdleTimeout,
        Setting::HardTimeout,
        Setting::InputWaitTimeout,
        Setting::InputWaitNotice,
        Setting::KillLadder,
        Setting::KillLadderGrace,
        Setting::CheckInterval,
        Setting::DrainCap,
        Setting::DrainQuiet,
        Setting::KillConfirmTimeout,
        Setting::FilesInclude,
        Setting::FilesExclude,
        Setting::FilesArmDelay,
        Setting::ChildrenCpuThreshold,
        Setting::CaptureCapPerStream,
        Setting::EventsThrottle,
        Setting::EventsChunkCap,
        Setting::EventsCapacity,
        Setting::EventsIdleWarning,
        Setting::SoloCap,
        Setting::Probes,
        Setting::CompletionOutput,
        Setting::CompletionFiles,
        Setting::CompletionLinger,
        Setting::PtySize,
    ];

    /// The setting's path in the configuration: `idle_timeout`, `files.exclude`,
    /// `kill_ladder.grace`.
    pub fn path(self) -> &'static str {
        match self {
            Setting::IdleTimeout => "idle_timeout",
            Setting::HardTimeout => "hard_timeout",
            Setting::InputWaitTimeout => "input_wait_timeout",
            Setting::InputWaitNotice => "input_wait_notice",
            Setting::KillLadder => "kill_ladder",
            Setting::KillLadderGrace => "kill_ladder.grace",
            Setting::CheckInterval => "check_interval",
            Setting::DrainCap => "drain_cap",
            Setting::DrainQuiet => "drain_quiet",
            Setting::KillConfirmTimeout => "kill_confirm_timeout",
            Setting::FilesInclude => "files.include",
            Setting::FilesExclude => "files.exclude",
            Setting::FilesArmDelay => "files.arm_delay",
            Setting::ChildrenCpuThreshold => "children.cpu_threshold",
            Setting::CaptureCapPerStream => "capture.cap_per_stream",
            Setting::EventsThrottle => "events.throttle",
            Setting::EventsChunkCap => "events.chunk_cap",
            Setting::EventsCapacity => "events.capacity",
            Setting::EventsIdleWarning => "events.idle_warning",
            Setting::SoloCap => "solo_cap",
            Setting::Probes => "probes",
            Setting::CompletionOutput => "completion.output",
            Setting::CompletionFiles => "completion.files",
            Setting::CompletionLinger => "completion.linger",
            Setting::PtySize => "pty",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_is_listed_once_with_a_path_of_its_own() {
        let mut paths: Vec<&str> = Setting::ALL.iter().map(|s| s.path()).collect();
        let count = paths.len();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), count, "two settings share a path");
        // A new variant fails to compile here until it is given its place, and then the
        // assertion fails until it is in ALL too.
        let place = |s: Setting| match s {
            Setting::IdleTimeout => 0,
            Setting::HardTimeout => 1,
            Setting::InputWaitTimeout => 2,
            Setting::InputWaitNotice => 3,
            Setting::KillLadder => 4,
            Setting::KillLadderGrace => 5,
            Setting::CheckInterval => 6,
            Setting::DrainCap => 7,
            Setting::DrainQuiet => 8,
            Setting::KillConfirmTimeout => 9,
            Setting::FilesInclude => 10,
            Setting::FilesExclude => 11,
            Setting::FilesArmDelay => 12,
            Setting::ChildrenCpuThreshold => 13,
            Setting::CaptureCapPerStream => 14,
            Setting::EventsThrottle => 15,
            Setting::EventsChunkCap => 16,
            Setting::EventsCapacity => 17,
            Setting::EventsIdleWarning => 18,
            Setting::SoloCap => 19,
            Setting::Probes => 20,
            Setting::CompletionOutput => 21,
            Setting::CompletionFiles => 22,
            Setting::CompletionLinger => 23,
            Setting::PtySize => 24,
        };
        assert_eq!(Setting::ALL.len(), 25);
        for (index, setting) in Setting::ALL.iter().enumerate() {
            assert_eq!(place(*setting), index, "{setting}");
        }
    }
}
