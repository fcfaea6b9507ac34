//! Pull-style activity sources: the monitor's side of asking [`Probe`]s (a setting, defined in
//! `probe.rs`) — each on a thread of its own, bounded in time on the session's clock, a panic
//! taken for "no".

use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};

use crate::activity::ActivitySource;
use crate::clock::Clock;
use crate::probe::Probe;

/// How long (real time) an answer is awaited before a timer on the session's clock is set.
const QUICK: Duration = Duration::from_millis(5);

/// One probe as the monitor holds it: its worker thread (started at the first question) and
/// its last yes.
struct Asked {
    probe: Probe,
    source: ActivitySource,
    worker: Option<Worker>,
    /// When it last said yes (asked), if ever.
    pub(crate) last_yes: Option<Instant>,
}

struct Worker {
    ask: Sender<()>,
    answer: Receiver<bool>,
    /// A question is out with no answer yet (a slow or blocked check).
    busy: bool,
}

/// The session's probes, on the monitor's side.
pub(crate) struct Prober {
    id: u64,
    probes: Vec<Asked>,
}

impl fmt::Debug for Prober {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prober")
            .field("probes", &self.probes.len())
            .finish()
    }
}

impl Prober {
    pub(crate) fn new(id: u64, probes: &[Probe]) -> Self {
        Self {
            id,
            probes: probes
                .iter()
                .map(|p| Asked {
                    source: p.source(),
                    probe: p.clone(),
                    worker: None,
                    last_yes: None,
                })
                .collect(),
        }
    }

    /// The probes with their threads started now (before the program: a thread the system
    /// refuses then fails the start, never a probe that cannot answer; issue 51 item 1).
    pub(crate) fn started(id: u64, probes: &[Probe]) -> io::Result<Self> {
        let mut prober = Self::new(id, probes);
        for asked in &mut prober.probes {
            let worker = start_worker(id, &asked.probe)
                .map_err(|e| crate::error::SpawnError::thread("probe", e))?;
            asked.worker = Some(worker);
        }
        Ok(prober)
    }

    /// Each probe's source and its last yes.
    pub(crate) fn states(&self) -> Vec<(ActivitySource, Option<Instant>)> {
        self.probes
            .iter()
            .map(|p| (p.source.clone(), p.last_yes))
            .collect()
    }

    /// Asks the probes at `ask` (by source) all at once; waits for each at most its timeout
    /// from `now` on `clock`. Returns the sources that said yes.
    pub(crate) fn ask(
        &mut self,
        ask: &[ActivitySource],
        clock: &Clock,
        now: Instant,
    ) -> Vec<ActivitySource> {
        let id = self.id;
        let mut waiting = Vec::new();
        for asked in self.probes.iter_mut().filter(|p| ask.contains(&p.source)) {
            if asked.send(id) {
                waiting.push(asked.source.clone());
            }
        }
        let mut yes = Vec::new();
        for asked in self
            .probes
            .iter_mut()
            .filter(|p| waiting.contains(&p.source))
        {
            // A quick answer is taken without a timer (a mock clock then keeps no leftover
            // timer for a test to trip on); a slow one is waited for on the session's clock.
            let answered = asked.quick_answer().unwrap_or_else(|| {
                let deadline = clock.at(now + asked.probe.timeout);
                asked.answer(&deadline)
            });
            if answered {
                asked.last_yes = Some(now);
                yes.push(asked.source.clone());
            }
        }
        yes
    }
}

impl Asked {
    /// Sends the question (starting the worker at the first one). `false`: not asked (the
    /// worker is still busy with an earlier question, or cannot be started): "no".
    fn send(&mut self, id: u64) -> bool {
        if self.worker.is_none() {
            self.worker = start_worker(id, &self.probe)
                .inspect_err(|e| {
                    log::warn!("session {id}: no thread for probe {}: {e}", self.probe.name);
                })
                .ok();
        }
        let Some(worker) = &mut self.worker else {
            return false;
        };
        if worker.busy {
            // A late answer to the earlier question frees it; the answer itself is stale.
            if worker.answer.try_recv().is_err() {
                log::debug!(
                    "session {id}: probe {} is still busy with an earlier question: no",
                    self.probe.name
                );
                return false;
            }
            worker.busy = false;
        }
        if worker.ask.send(()).is_err() {
            return false; // the worker is gone
        }
        worker.busy = true;
        true
    }

    /// The answer, if it comes within [`QUICK`] of real time.
    fn quick_answer(&mut self) -> Option<bool> {
        let worker = self.worker.as_mut()?;
        let answer = worker.answer.recv_timeout(QUICK).ok()?;
        worker.busy = false;
        Some(answer)
    }

    /// Waits for the answer until `deadline` fires.
    fn answer(&mut self, deadline: &Receiver<Instant>) -> bool {
        let Some(worker) = &mut self.worker else {
            return false;
        };
        select! {
            recv(worker.answer) -> answer => {
                worker.busy = false;
                answer.unwrap_or(false)
            }
            recv(deadline) -> _ => {
                log::debug!("probe {} did not answer in time: no", self.probe.name);
                false
            }
        }
    }
}

fn start_worker(id: u64, probe: &Probe) -> io::Result<Worker> {
    let (ask_tx, ask_rx) = crossbeam_channel::bounded::<()>(1);
    let (answer_tx, answer_rx) = crossbeam_channel::bounded::<bool>(1);
    let check = probe.check.clone();
    let name = probe.name.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("quietus-probe-{id}"))
        .spawn(move || {
            for () in ask_rx {
                let answer = catch_unwind(AssertUnwindSafe(|| check())).unwrap_or_else(|_| {
                    log::warn!("probe {name} panicked: no");
                    false
                });
                if answer_tx.send(answer).is_err() {
                    return;
                }
            }
        });
    spawned.map(|_| Worker {
        ask: ask_tx,
        answer: answer_rx,
        busy: false,
    })
}
