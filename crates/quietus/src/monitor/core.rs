//! The session's core: what every stage of a launch and then the monitor share, made once
//! before the spawn — the session's id, its configuration, its clock, its activity board and
//! the event emitter that observes the board. The launcher (`monitor::launch`) moves it
//! whole from stage to stage into the [`Monitor`](super::run::Monitor); a test makes one the
//! same way, with no process.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64};

use crate::activity::{ActivityBoard, ActivitySource};
use crate::clock::Clock;
use crate::config::MonitorConfig;
use crate::contract::{SessionState, Shared};
use crate::events::{ActivityEvents, Emitter};

/// What every stage of a session shares, made once before the spawn.
pub(super) struct Core {
    /// The session's id (threads' names, logs, the orphan attribution).
    pub(super) id: u64,
    pub(super) config: MonitorConfig,
    pub(super) clock: Clock,
    /// The activity board: every source reports here, the verdict reads it.
    pub(super) board: Arc<ActivityBoard>,
    /// The event emitter, observing the board.
    pub(super) emitter: Arc<Emitter>,
}

impl Core {
    /// The core of session `id`: its board (its probes registered, the output sources on or
    /// off as configured) and the emitter that observes it.
    pub(super) fn new(id: u64, config: MonitorConfig, clock: Clock) -> Core {
        let probes: Vec<Arc<str>> = config
            .probes
            .iter()
            .filter_map(|p| match p.source() {
                ActivitySource::Probe(name) => Some(name),
                _ => None,
            })
            .collect();
        let board = Arc::new(ActivityBoard::with_probes(clock.clone(), &probes));
        board.set_enabled(&ActivitySource::Output, config.enabled.output);
        board.set_enabled(
            &ActivitySource::RepeatedOutput,
            config.watches(&ActivitySource::RepeatedOutput),
        );
        let emitter = Arc::new(Emitter::new(config.events.capacity));
        board.observe(Arc::new(ActivityEvents::new(
            emitter.clone(),
            config.events.throttle,
        )));
        Core {
            id,
            config,
            clock,
            board,
            emitter,
        }
    }

    /// What the session and the monitor share, before any stream is opened: no recorder, no
    /// terminal, no stdin queue (the launcher adds the streams it opens).
    pub(super) fn shared(&self) -> Shared {
        Shared {
            result: std::sync::OnceLock::new(),
            pumps: Default::default(), // two distinct states
            recorders: [None, None],
            combined: false,
            terminal: None,
            emitter: self.emitter.clone(),
            phase: AtomicU8::new(SessionState::RUNNING),
            idle_timeout: AtomicU64::new(crate::clock::saturating_nanos(self.config.idle_timeout)),
            spills: [None, None],
            stdin: crate::sync::Mutex::new(None),
            home: None,
            caps: self.config.effective_caps(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::MockClock;
    use crate::events::Event;
    use crate::probe::Probe;

    #[test]
    fn the_board_has_the_probes_and_the_output_sources_as_configured() {
        let config = MonitorConfig::builder()
            .watch_output(false)
            .probe(Probe::new("db", || true))
            .build()
            .expect("valid");
        let core = Core::new(7, config, Clock::from(&MockClock::new()));
        let reading = core.board.read();
        let state = |source: &ActivitySource| {
            reading
                .sources
                .iter()
                .find(|s| &s.source == source)
                .map(|s| s.enabled)
        };
        assert_eq!(state(&ActivitySource::probe("db")), Some(true));
        assert_eq!(state(&ActivitySource::Output), Some(false));
        assert_eq!(state(&ActivitySource::RepeatedOutput), Some(false));
        assert_eq!(core.id, 7);
    }

    #[test]
    fn the_emitter_observes_the_board_and_the_shared_state_starts_running() {
        let clock = MockClock::new();
        let config = MonitorConfig::builder()
            .idle_timeout(Duration::from_secs(9))
            .build()
            .expect("valid");
        let core = Core::new(1, config, Clock::from(&clock));
        let events = core.emitter.receiver();
        clock.advance(Duration::from_secs(1));
        core.board.stamp(&ActivitySource::Output);
        let first = events.try_recv().expect("the board's activity is an event");
        assert!(matches!(first, Event::Activity { .. }), "{first:?}");
        let shared = core.shared();
        assert_eq!(shared.state(), SessionState::Running);
        assert_eq!(shared.idle_timeout(), Duration::from_secs(9));
        assert!(shared.recorders.iter().all(Option::is_none));
        assert!(Arc::ptr_eq(&shared.emitter, &core.emitter));
    }
}
