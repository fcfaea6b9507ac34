//! Supervise a child process and end its whole process tree only when it has truly stalled.
//!
//! Agent CLIs run unattended in loops can hang forever, or look idle while they really work.
//! A plain timeout kills good work; no timeout leaves runaway processes. stallwatch watches the
//! child's activity and ends it only when **every** source has been quiet for the idle timeout:
//!
//! - **output**: any read of more than 0 bytes from its stdout or stderr (a partial line counts);
//! - **files**: a create, modify, rename or remove under the watched folders (default `.agent`
//!   in the child's working directory; never a mere read), see [`FileWatchConfig`];
//! - **children**: CPU progress of the child's descendants between two samples (a compiler or a
//!   test run in a grandchild), see [`ChildWatchConfig`];
//! - **network**: bytes received or sent on the TCP sockets any process of the tree holds
//!   (Linux socket diagnostics), at least 1 KiB within 10 s: never "a socket is open";
//! - **keepalive**: an explicit [`Session::keepalive`] from the caller.
//!
//! When it is stale, a [`Diagnosis`] says why: waiting for input, on a network peer, sleeping,
//! stopped, waiting on a child, deadlocked, in disk wait, busy ([`StallKind`]).
//!
//! Then it runs a kill ladder (SIGTERM, a grace period, SIGKILL) on the child's whole process
//! group. A hard timeout ends the child even while it is active.
//!
//! Three rules refine that: **completion** ([`CompletionConfig`]: an output line, a file, a
//! callback says the work is done; the child then has a linger to exit, else it is ended as
//! [`Outcome::Completed`], exit code 0); **probes** ([`Probe`]: pull-style sources asked only
//! when the child is about to be judged stale); and **solo caps**
//! ([`MonitorConfig::solo_cap`]: the longest one source may keep a child alive on its own;
//! children 30 minutes by default, so a spinning grandchild of a silent agent does not keep it
//! alive for ever).
//!
//! # As a dependency
//!
//! The default feature `cli` builds the `stallwatch` command and pulls its dependencies
//! (clap, serde, serde_json, env_logger, signal-hook, nix). A library user turns it off:
//!
//! ```toml
//! [dependencies]
//! stallwatch = { version = "0.1", default-features = false }
//! ```
//!
//! # Tutorial
//!
//! Spawn a command under supervision and wait for the result:
//!
//! ```
//! use std::process::Command;
//! use std::time::Duration;
//! use stallwatch::{MonitorConfig, Outcome, Session};
//!
//! let mut command = Command::new("sh");
//! command.args(["-c", "echo working; sleep 30"]);
//! let config = MonitorConfig::default().idle_timeout(Duration::from_millis(300));
//! let session = Session::spawn(command, config)?;
//! let result = session.wait();
//! // Silent for 300 ms after its one line: ended, the way GNU `timeout` reports it.
//! assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
//! assert_eq!(result.exit_code(), 124);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A [`Program`] in place of the `Command` (its arguments, working directory and variables,
//! nothing stallwatch cannot see) starts faster on Linux x86-64: without a fork of the
//! supervising process, as `posix_spawn` does.
//!
//! Choose where the output goes, end the tree on request, keep a quiet child alive:
//!
//! ```
//! use std::process::Command;
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use stallwatch::{KillLadder, MonitorConfig, Outcome, OutputSink, Session, Signal};
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let sink = seen.clone();
//! let mut command = Command::new("sh");
//! command.args(["-c", "echo started; exec sleep 30"]);
//! let session = Session::builder(command)
//!     .config(
//!         MonitorConfig::default()
//!             .idle_timeout(Duration::from_secs(60))
//!             .kill_ladder(KillLadder::polite(Signal::INT, Duration::from_secs(2))),
//!     )
//!     .stdout(OutputSink::callback(move |chunk| sink.lock().unwrap().extend_from_slice(chunk)))
//!     .stderr(OutputSink::writer(std::io::stderr()))
//!     .spawn()?;
//! session.keepalive(); // the orchestrator knows the child is fine
//! session.terminate(); // ...and then decides to stop it: INT, 2 s, KILL
//! let result = session.wait();
//! assert_eq!(result.outcome, Outcome::Terminated { forced: false });
//! assert_eq!(result.signal(), Some(2));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Keep the output without letting memory grow with a chatty child, get the complete transcript
//! on disk when it is long, and follow the run live:
//!
//! ```
//! use std::process::Command;
//! use stallwatch::{CaptureConfig, Event, MonitorConfig, Session};
//!
//! let logs = tempfile::tempdir()?;
//! let mut command = Command::new("sh");
//! command.args(["-c", "head -c 100000 /dev/zero | tr '\\0' x; echo; echo done >&2"]);
//! let session = Session::builder(command)
//!     .config(MonitorConfig::default().capture(
//!         CaptureConfig::default()
//!             .cap_per_stream(64 * 1024) // 32 KiB of head, 32 KiB of tail in memory
//!             .log_dir(logs.path()),     // the complete streams, once past 4 KiB
//!     ))
//!     .spawn()?;
//! for event in session.events().iter() {
//!     if let Event::IdleWarning { left } = event {
//!         eprintln!("quiet; ended in {left:?} unless something happens");
//!     }
//! }
//! let result = session.wait();
//! let snapshot = session.snapshot();
//! let stdout = snapshot.stdout.unwrap();
//! assert_eq!(stdout.total, 100_001);
//! assert_eq!(stdout.omitted, 100_001 - 64 * 1024); // the middle, counted exactly
//! assert_eq!(result.logs.len(), 1);                // stdout passed 4 KiB: logged whole
//! assert_eq!(result.logs[0].bytes, 100_001);
//! assert_eq!(result.logs[0].sha256.len(), 64);
//! assert_eq!(snapshot.stderr.unwrap().render(), b"done\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Test your own orchestration logic without waiting: inject a [`MockClock`] and move time by
//! hand. [`MockClock::wait_for_timers`] tells when the monitor is parked on its next deadline.
//!
//! ```
//! use std::process::Command;
//! use std::time::Duration;
//! use stallwatch::{MockClock, MonitorConfig, Outcome, Session};
//!
//! let clock = MockClock::new();
//! let mut command = Command::new("sleep");
//! command.arg("1000");
//! let session = Session::builder(command)
//!     .config(MonitorConfig::default()) // 300 s idle timeout
//!     .clock(clock.clone())
//!     .spawn()?;
//! assert!(clock.wait_for_timers(1, Duration::from_secs(10)));
//! clock.advance(Duration::from_secs(299));
//! assert!(clock.wait_for_timers(1, Duration::from_secs(10)));
//! assert!(session.try_wait().is_none());
//! clock.advance(Duration::from_secs(1)); // five minutes of silence, in no time at all
//! let result = session.wait();
//! assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
//! assert_eq!(result.runtime, Duration::from_secs(300));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Recognise that the work is done even when the child hangs after it, and cap how long one
//! source may keep a quiet child alive:
//!
//! ```
//! use std::process::Command;
//! use std::time::Duration;
//! use stallwatch::{ActivitySource, CompletionConfig, MonitorConfig, Outcome, Session};
//!
//! let mut command = Command::new("sh");
//! command.args(["-c", "echo 'RESULT: 42'; exec sleep 1000"]); // done, but never exits
//! let config = MonitorConfig::default()
//!     .completion(CompletionConfig::default().output("^RESULT:").linger(Duration::from_millis(100)))
//!     .solo_cap(ActivitySource::Children, Some(Duration::from_secs(600)));
//! let result = Session::spawn(command, config)?.wait();
//! let Outcome::Completed(seen) = &result.outcome else { panic!("{:?}", result.outcome) };
//! assert_eq!(seen.matched, "RESULT: 42");
//! assert_eq!(result.exit_code(), 0); // the work is done: not a timeout
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Run several children at once and steer them by id with a [`Registry`]; give each a clean
//! [`Environment`] (an allowlist over an empty environment, an isolated home seeded with the
//! files it needs); run a command again when it fails with a known transient message
//! ([`RetryPolicy`]):
//!
//! ```
//! use std::process::Command;
//! use std::time::Duration;
//! use stallwatch::{
//!     ControlAction, ControlAnswer, Environment, Lifecycle, MonitorConfig, Registry, Session,
//! };
//!
//! let home = tempfile::tempdir()?;
//! let registry = Registry::new();
//! for seconds in ["1000", "2000"] {
//!     let mut command = Command::new("sleep");
//!     command.arg(seconds);
//!     let builder = Session::builder(command)
//!         .config(MonitorConfig::default().idle_timeout(Duration::from_secs(600)))
//!         .environment(Environment::empty().inherit("PATH").home(home.path()));
//!     registry.spawn(builder)?;
//! }
//! let lines: Vec<String> = registry.list().iter().map(ToString::to_string).collect();
//! assert!(lines[0].starts_with("#01 running uptime="), "{lines:?}");
//! assert!(lines[1].ends_with(" log=- cmd=sleep 2000"), "{lines:?}");
//! let longer = ControlAction::Keepalive { idle_timeout: Some(Duration::from_secs(1800)) };
//! assert_eq!(registry.control(1, longer), ControlAnswer::Ack);
//! assert_eq!(registry.control(2, ControlAction::Kill), ControlAnswer::Ack);
//! assert_eq!(registry.get(2).unwrap().wait().signal(), Some(9));
//! assert_eq!(registry.control(2, ControlAction::Terminate), ControlAnswer::AlreadyEnded);
//! let ended = registry.shutdown_all(); // #01: the ladder, and wait
//! assert_eq!(ended.len(), 1);
//! assert!(registry.list().iter().all(|s| s.state == Lifecycle::Ended));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Run a program that wants a terminal on a pseudo-terminal ([`SessionBuilder::pty`]): what it
//! writes is one stream, [`Stream::Terminal`]; type into it, resize it, send Ctrl-C through it
//! ([`Session::interrupt`]):
//!
//! ```
//! use std::process::Command;
//! use stallwatch::{Session, Stream};
//!
//! let mut command = Command::new("sh");
//! command.args(["-c", "test -t 1 && echo tty; read line; echo \"got $line\""]);
//! let session = Session::builder(command).pty(24, 80).spawn()?;
//! session.write_stdin(b"hello\n")?; // typed: the terminal echoes it
//! let result = session.wait();
//! assert_eq!(result.exit_code(), 0);
//! let terminal = session.snapshot().terminal.expect("a terminal session");
//! let text = terminal.render_lossy(); // the terminal echoes the typed line when it arrives
//! assert!(text.contains("tty\r\n") && text.ends_with("got hello\r\n"), "{text:?}");
//! assert_eq!(session.output_bytes(Stream::Terminal), terminal.total);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Theory of operation
//!
//! Data flows one way: child → activity sources → [`ActivityBoard`](parts::ActivityBoard) →
//! monitor → verdict → kill ladder → [`MonitorResult`]. ("Signal" means only a Unix signal;
//! what produces activity is a *source*.)
//!
//! Where each part lives (all modules are private; the public names are re-exported flat at
//! the crate root, and the stand-alone parts in [`parts`]):
//!
//! - `session` and `registry`: the handles a caller holds ([`Session`], [`SessionBuilder`],
//!   [`Registry`]); `contract`: what a session handle and its monitor thread share, the
//!   control messages between them, and the [`Lifecycle`] — both sides import it, neither
//!   imports the other.
//! - `monitor/`: `launch` spawns the child, its pipes and its threads and hands the session
//!   what it needs; `run` is the monitor loop (watch, stale, hard deadline, drain, each one
//!   method); `ladder` is the kill ladder, acting through a small `ProcessLayer` trait (the
//!   operating system in a session, a fake in its unit tests); `tap` is the output as the
//!   monitor sees it (peeking at the pipes, flushing throttled `Output` events).
//! - `sources/`: the activity sources — `output` (the reader threads,
//!   [`ActivityTrackingReader`](parts::ActivityTrackingReader)), `files`
//!   ([`FileActivityTracker`](parts::FileActivityTracker)), `children`
//!   ([`DescendantObserver`](parts::DescendantObserver)), `network`
//!   ([`NetworkObserver`](parts::NetworkObserver)), each only stamping the board.
//! - `diagnosis`: the pure classifier of a stall ([`Diagnosis`], [`StallKind`]), over a
//!   snapshot that `process/sys/snapshot` reads from `/proc`; `input_wait`: the pure rule
//!   that says when a tree has waited on input long enough, fed such snapshots.
//! - `activity`: the board the sources stamp; `verdict`: the pure decision the monitor asks
//!   (board snapshot, time, limits → what to do), tested without threads or processes.
//! - `process/`: spawning in a new process group, the spawner thread and the guardian;
//!   `process/cgroup` is a session's cgroup v2 (made, entered, signalled, killed, read,
//!   removed); `process/orphans` attributes the orphans adopted in subreaper mode to their
//!   session; `process/sys` holds the operating-system calls (rustix, pidfds, and libc for the
//!   guardian's fork) and every `unsafe` block of the crate.
//! - `capture/` (head/tail buffers, the log spill), `events` (the never-blocking emitter),
//!   `outcome` ([`Outcome`], [`MonitorResult`]), `config`, `clock`, `environment`, `retry`.
//!
//! - **Spawn.** The child is the leader of a new process group, stdout and stderr piped, stdin
//!   null unless chosen. On Linux it gets SIGKILL if the supervising process dies
//!   (`PR_SET_PDEATHSIG`, with a `getppid` re-check against a parent that died first). Linux
//!   ties that signal to the thread that forked, so the child is forked from the main thread
//!   (whose end is the process's) or from one long-lived spawner thread. In a cgroup, the
//!   guardian below exists before the cgroup does and ends every member if the supervisor
//!   dies: the program needs no signal of its own there, and is forked from the caller's thread.
//!   That signal reaches only the direct child, so a guardian (a fork of the supervisor that
//!   runs no program, in a process group of its own, every inherited descriptor closed but a
//!   socket only the supervisor holds the other end of) SIGKILLs the whole group when the
//!   supervisor vanishes without saying `done`. It is forked before any reader thread starts, so
//!   no output of the child is passed on before it exists; it is not forked at all when the run
//!   is already over with nothing to guard (the leader exited and, adopting orphans without a
//!   cgroup, the supervisor has no other child: every live descendant would be one). When a run
//!   is over, the supervisor hands it the file tracker's inotify instances, whose teardown in
//!   the kernel (8–11 ms) then happens when the guardian exits, not on the supervisor's way
//!   out.
//! - **Sources** only stamp the board (atomics): the reader threads `stallwatch-out-<id>` and
//!   `stallwatch-err-<id>` at every non-empty read, [`Session::keepalive`] at the call, and the
//!   [`FileActivityTracker`](parts::FileActivityTracker) from `notify`'s event handler. With an
//!   arming delay ([`FileWatchConfig::arm_delay`], 50 ms in the command) a session's tracker runs
//!   nothing until the monitor arms it (the delay is real time, a frozen test clock does not
//!   hold it back), and what changed before the arming counts then; a program that ends within
//!   the delay costs no thread. The tracker's own thread
//!   (`stallwatch-files`) re-arms watches when a root appears, vanishes or is re-created (a
//!   missing root is awaited through its nearest existing ancestor), and stat-scans the roots at
//!   the check interval when the OS is out of watches (or when
//!   [`FileWatchConfig::force_stat_scan`] asks). Reads, opens and closes never count, nor do
//!   excluded files (`*.log`, editor artefacts) or files stallwatch writes itself (its logs,
//!   and [`FileWatchConfig::own_files`]), matched by resolved path. Metadata changes count in
//!   both modes. A folder that cannot be watched is retried on its changes and at the check
//!   interval, the rest of its tree watched around it, and listed in
//!   [`MonitorResult::unwatched`].
//! - **Monitor** (`stallwatch-mon-<id>`) sleeps on its control channel and on one timer set to
//!   the exact next instant its decision can change: last activity + idle timeout, the hard
//!   deadline, or the next descendant sample (every check interval, default idle timeout / 10
//!   clamped to 100 ms..30 s). No other tick, no busy loop. Its first act is the baseline sample
//!   of the descendants' CPU and sockets (none for a leader that already exited: its run is
//!   over). The decision is a pure function of
//!   a board snapshot, the time and the limits. At the stale instant the monitor takes one
//!   fresh descendant sample first, so a grandchild working right now is never killed for want
//!   of a poll.
//! - **Descendants** ([`DescendantObserver`](parts::DescendantObserver)): on Linux a walk of
//!   `/proc/<pid>/task/<tid>/children` from the child (cost grows with the tree, not with the
//!   machine) reading `/proc/<pid>/stat`; elsewhere `sysinfo`. Identity is (pid, start time).
//!   CPU is user + system time plus the reaped children's time, so work that started and
//!   finished between two samples counts, but never twice. Activity needs 5 % of a core over the
//!   interval (at least 20 ms): an idly polling daemon at about 1 % does not keep a stuck agent
//!   alive. The direct child's own CPU does not count unless asked. Every descendant seen is
//!   remembered while it lives, even after `setsid` or re-parenting to init; the ladder
//!   signals those escapees by pid, after re-checking their start time. An opt-in subreaper
//!   mode ([`ChildWatchConfig::subreaper`], Linux, process-wide) also catches a daemon that
//!   double-forks away between two samples: it comes back to this process and is attributed
//!   to its session whatever its environment — seen in the tree, the session's
//!   `STALLWATCH_SESSION` tag, the leader's group, the session's pipes, or having started
//!   while that session alone ran (the rule and its limits: [`ChildWatchConfig::subreaper`]).
//! - **Rules beyond the idle timeout**, all in the pure verdict. *Solo caps*: a capped
//!   source's activity counts only up to its cap after the latest activity of any other
//!   enabled source (or the start), so alone it keeps the child at most idle timeout + cap;
//!   the stale report lists it in [`StaleReport::capped`]. *Completion*: the readers split the
//!   output into lines (`\n` or `\r`, across reads; `sources/lines`) and test each against
//!   the patterns and the callback, and the monitor looks at the completion files every check
//!   interval (at most every second); the first sign starts the linger, at whose end (or at
//!   staleness or the hard deadline, if sooner) the ladder runs with the outcome
//!   [`Outcome::Completed`]. *Probes*: at a stale decision, after the fresh descendant sample,
//!   the monitor asks every probe whose yes would count (not a capped one) on the probe's own
//!   thread (`stallwatch-probe-<id>`), waiting at most its timeout on the session's clock; a
//!   yes less than a check interval old is not asked again. *Repeated output* (opt-in): the
//!   readers stamp [`ActivitySource::RepeatedOutput`] instead of output for a read whose lines
//!   all repeat one of the last 16 distinct lines (digits aside).
//! - **Network** ([`NetworkObserver`](parts::NetworkObserver), sampled right after the
//!   descendants, over the tree's live pids): the `socket:[inode]` links in `/proc/PID/fd`
//!   name the sockets the tree holds; the kernel's socket diagnostics (`NETLINK_SOCK_DIAG`,
//!   `inet_diag` with `tcp_info`, parsed by hand over rustix's netlink socket) give each TCP
//!   socket's `bytes_received` and `bytes_acked`. A sample is activity when bytes moved since
//!   the previous one and at least 1 KiB moved within the last 10 s (keep-alive pings stay
//!   under it); a socket first seen after the baseline counts whole. A process's links are
//!   read again only when it may have changed them: its last walk stands while it provably
//!   has not run since (its main thread's exact run time in `/proc/PID/schedstat` unchanged,
//!   read after `/proc/PID/wchan` found it off the CPU, and single-threaded at the walk; one
//!   `pread` each on files kept open for up to 16 processes), and a process that ran is walked
//!   again at the next sample. Known sockets are asked for one by one (exact requests, one
//!   batch): their counters move without their process running; only a socket not seen yet
//!   costs a dump of the namespace; while the tree holds no socket no netlink request is
//!   made. Where socket diagnostics are refused, the source is unavailable
//!   ([`MonitorResult::network_unavailable`] says why), never a failed spawn.
//! - **Diagnosis.** At the stale decision (before the first signal) and with each idle warning,
//!   one snapshot of every live process of the tree (state, wait channel, the blocking system
//!   call from `/proc/PID/syscall` with its descriptor resolved through `/proc/PID/fd`, epoll
//!   sets through `/proc/PID/fdinfo`, poll/select sets through `/proc/PID/mem`) is classified
//!   by a pure function into one [`StallKind`]: [`StaleReport::diagnosis`] and
//!   [`Event::Diagnosis`]. Reading stops after 20 ms (the rest is `unknown`).
//! - **Input waits** ([`MonitorConfig::input_wait_timeout`], off by default): once every
//!   source has been quiet for min(D/2, 1 s), the monitor takes a snapshot every D/4 (within
//!   50..250 ms) and reads each process's read count (`syscr` in `/proc/PID/io`); a pure rule
//!   (`input_wait`) fed those looks says when the whole tree has waited on input (classified
//!   `awaiting_input`, nothing running) with unchanged read counts for D: [`Event::InputWait`]
//!   once per episode, then the ladder with [`Outcome::InputWait`]. A child whose stdin is fed
//!   is found in `read` at every look, but its read count moves: never ended for it.
//! - **Non-interactive profile** ([`SessionBuilder::non_interactive`]): stdin `/dev/null`, a
//!   session of its own without a controlling terminal (pipe mode), and
//!   [`NON_INTERACTIVE_ENV`] unless the caller set those variables on the command.
//! - **Ending.** Each ladder step goes to the whole process group (never to a pgid ≤ 1 or to
//!   stallwatch's own group), to the leader by pid when it has left its group (it may even
//!   join stallwatch's own), and to the remembered escapees by pid; polite steps are followed
//!   by SIGCONT so stopped processes can act on them. The leader is watched with `waitid(WNOWAIT)` and not reaped until
//!   the ladder is done, so neither its pid nor its group id can be reused under the signals.
//!   If even SIGKILL is not confirmed within [`MonitorConfig::kill_confirm_timeout`], the result
//!   says [`termination_unproven`](MonitorResult::termination_unproven) instead of hanging.
//! - **How the tree is held** ([`MonitorConfig::containment`], [`ContainmentMode`]). Where
//!   this process can create a child of its own cgroup v2 (root, a systemd-delegated slice, a
//!   privileged container; the cgroup2 mount is found in `/proc/self/mountinfo`, hybrid
//!   layouts included, the own cgroup in `/proc/self/cgroup`), each session gets one,
//!   `stallwatch-<pid>-<session>`, and the program's process is born in it: in the `pre_exec`
//!   hook, after std set the child up, the forked process calls `clone3(CLONE_INTO_CGROUP |
//!   CLONE_PARENT)` and hands the new process's pid over before it exits; the new process, a
//!   child of this one, runs the program (before kernel 5.7 the forked process enters by a
//!   write to `cgroup.procs` instead, which waits for an RCU grace period, ~10 ms). So the
//!   program's first instruction runs inside and every descendant is born there: `setsid`, a double fork, `env -i` or
//!   re-parenting cannot leave it (only a process with the right to write another cgroup's
//!   `cgroup.procs`, root, could). Then the tree *is* the cgroup's members: each polite step
//!   goes to every member (listed in `cgroup.procs`, below-cgroups included, each through a
//!   pidfd whose membership is checked after it is opened), SIGKILL is `cgroup.kill` (atomic
//!   against forks; before kernel 5.14 the cgroup is frozen and each member killed), "the tree
//!   is gone" is `populated 0` in `cgroup.events` (zombies are not members; no scan of
//!   `/proc`), descendant CPU is `usage_usec` of `cpu.stat` minus the leader's own (escapees
//!   and reaped children included, exact), and the memory peak and OOM kills
//!   ([`MonitorResult::memory_peak`], [`MonitorResult::oom_kills`]) are read where the memory
//!   controller is enabled for it. The cgroup is removed when the run is over (leftovers that
//!   [`LeftoverPolicy::Keep`] keeps move to this process's own cgroup first), when the spawn
//!   fails, when the monitor unwinds (its `Drop` kills what is left), and, if this process is
//!   SIGKILLed, by the guardian, which `cgroup.kill`s it and removes it. Under
//!   [`ContainmentMode::Auto`] (the default) a session that cannot have a cgroup falls back to
//!   the process group and [`MonitorResult::containment`] says why;
//!   [`ContainmentMode::Cgroup`] makes that an error ([`SpawnErrorKind::Containment`]). What
//!   the group backend cannot do: see a descendant that left the group between two samples
//!   with neither tag nor pipe (its CPU then does not count, and it survives the ladder unless
//!   subreaper mode attributes it); what the cgroup backend cannot do: hold a process that root
//!   moves out on purpose, or read memory figures when the controller is not delegated.
//! - **pidfds.** Every signal to one process goes through a pidfd (`pidfd_open`,
//!   `pidfd_send_signal`, Linux 5.3): the leader's is opened at the spawn (it is not reaped
//!   before the ladder is done); an escapee's or adopted orphan's is opened the first time the
//!   ladder signals it and kept only if the process behind it still has the remembered start
//!   time (checked after the open, so the pidfd names that process): a pid reused meanwhile
//!   can never be hit. Kernels without pidfds keep the start-time check just before `kill`.
//! - **After a normal exit**, members left in the group are ended with the same ladder (or kept:
//!   [`LeftoverPolicy::Keep`]). Readers drain until end-of-file, until the pipes are empty and
//!   output has been quiet for [`MonitorConfig::drain_quiet`], or until the drain cap, so a
//!   grandchild holding a pipe never makes `wait` hang; bytes already read are always delivered.
//!   Those two limits are only for pipes someone still holds open: a pipe nobody holds any more
//!   (the tree is gone) is read to its end, however far the log spill lags behind, and every
//!   byte read is written and hashed in the log before `wait` returns (bounded by the disk).
//! - **Time.** Every duration (idle, hard, grace, drain) is measured on the session's [`Clock`].
//!   The only real-time waits are short re-checks of operating-system state (is the group gone,
//!   is the pipe empty) which progress in real time whatever a mock clock says.
//! - **First reason wins.** The [`Outcome`] is fixed the first time a reason to end is found.
//! - **Capture.** Each reader hands every chunk to its sink first (pass-through), then to a
//!   head/tail buffer with a byte cap (the middle is dropped and counted exactly), then to the
//!   log spill: once a stream passes 4 KiB its complete content from byte 0 goes to a log file
//!   (create-new, no symlink following, mode 0600, folder 0700, an exclusive `flock` while it
//!   is written), SHA-256-hashed on a thread of its own (`stallwatch-logout-<id>` /
//!   `-logerr-`) while another (`stallwatch-logw-<id>`) writes the file, at most 2 MiB in
//!   flight on each hop. A named log folder that cannot be used fails the spawn
//!   ([`SpawnErrorKind::LogDir`]); an unusable default folder means no log, with a warning and
//!   the reason in each [`LogFile`]. The folder keeps a budget ([`LogRetention`]). The child's
//!   pipes are grown to 1 MiB and read 64 KiB at a time. The combined mode sends both streams
//!   through one pipe, in order.
//! - **Events** ([`Session::events`]) go through one bounded channel and never block anybody:
//!   `Output` (throttled per stream, capped, optionally cut on UTF-8 boundaries) and `Activity`
//!   (rate-limited) are dropped when the consumer lags (counted in
//!   [`MonitorResult::events_dropped`]; the next `Output` is flagged, its sequence number shows
//!   the gap), while room is reserved for `Started` (first), `IdleWarning`, `Signal`, `Exited`
//!   (once), `Diagnosis`, `InputWait` and `Closed` (last, after the output is drained).
//! - **Dropping** a running [`Session`] starts the ladder in the background.
//! - **Names.** [`Session::terminate`] starts the ladder and [`Session::start_kill`] sends
//!   SIGKILL; both return at once (then [`Session::wait`]). [`Lifecycle::Ended`] is any end,
//!   the child's own exit included; the [`Outcome`] says which. A [`Registry`] numbers its
//!   sessions with [`RegistryId`]s (1, 2, 3… per registry), a space of its own, apart from the
//!   process-wide [`Session::id`].
//!
//! - **Spawn errors.** [`SessionBuilder::spawn`] returns an `io::Result` (`?` works as with
//!   `Command::spawn`; the `io::ErrorKind` is the failure's: `NotFound` for a missing program,
//!   `InvalidInput` for an invalid configuration). Every error carries a [`SpawnError`]
//!   ([`SpawnError::of`]) whose [`SpawnErrorKind`] names the step that failed: the
//!   configuration, the isolated home, the log folder, the terminal, the pipes, the working
//!   directory, the program itself, a thread. A failure leaves nothing running.
//!
//! - **The service.** `stallwatch serve` (the binary, feature `cli`) offers sessions to any
//!   language over JSON-RPC on stdio. It is a client of this public API, like the command: one
//!   [`Registry`], a [`Session::events`] forwarder per process turning events into
//!   notifications (dropped and flagged when its client lags, so a child is never slowed),
//!   [`Session::write_stdin`], [`Session::resize`], [`Session::snapshot`],
//!   [`Registry::control`] and [`Registry::list`]. The README documents the protocol.
//!
//! Exit codes follow GNU `timeout`: see [`MonitorResult::exit_code`].
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod activity;
mod capture;
mod clock;
mod completion;
mod config;
mod contract;
mod diagnosis;
mod environment;
mod error;
mod events;
mod input_wait;
mod monitor;
mod outcome;
mod own_files;
mod process;
mod program;
mod registry;
mod retry;
mod session;
mod signal;
mod sources;
mod stream;
mod sync;
mod verdict;

/// The README's Rust examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod parts;

pub use activity::ActivitySource;
pub use capture::spill::{LogDirError, LogFile, default_log_dir};
pub use capture::{CapturedStream, Snapshot};
pub use clock::{Clock, MockClock, SystemClock};
pub use completion::{CompletionConfig, LineCallback};
pub use config::{
    CaptureConfig, ChildWatchConfig, ContainmentMode, DEFAULT_CHILDREN_SOLO_CAP, EventConfig,
    FileWatchConfig, KillLadder, KillStep, LeftoverPolicy, LogRetention, MonitorConfig,
};
pub use contract::Lifecycle;
pub use diagnosis::{Diagnosis, ProcessDiagnosis, StallKind};
pub use environment::{Environment, HomeReport, SeedFailure};
pub use error::{ConfigError, SpawnError, SpawnErrorKind};
pub use events::Event;
pub use input_wait::InputWait;
pub use outcome::{
    CompletionSeen, CompletionTrigger, Containment, DescendantSummary, EXIT_CANNOT_EXECUTE,
    EXIT_INTERNAL, EXIT_NOT_FOUND, EXIT_TIMEOUT, MonitorResult, Outcome, SourceIdle, StaleReport,
    SupervisorDeath, Unwatched,
};
pub use program::Program;

/// The guardian: one helper process per supervising process that ends every live session's
/// tree if the supervisor dies (see [`SupervisorDeath`]).
pub mod guardian {
    pub use crate::process::guardian::{PROGRAM_VARIABLE, SUBCOMMAND, set_program};

    /// The guardian's own life, for a binary that serves as one (`stallwatch __guardian`):
    /// returns its exit status. Not for other use.
    #[doc(hidden)]
    pub fn run() -> i32 {
        crate::process::sys::unsafe_calls::close_inherited(3);
        crate::process::guardian::run()
    }
}
pub use registry::{ControlAction, ControlAnswer, Registry, RegistryId, SessionSummary};
pub use retry::{Attempt, RetryPolicy, RetryReason, RetryReport};
pub use session::{EventReceiver, NON_INTERACTIVE_ENV, Session, SessionBuilder};
pub use signal::Signal;
pub use sources::output::OutputSink;
pub use sources::probes::Probe;
pub use stream::Stream;
