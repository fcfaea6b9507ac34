//! What one more start costs in a process already holding many sessions (issue 50): the
//! library's [`Session::spawn`] of a [`Program`] in a process holding `n` sleeping sessions
//! (100 and 1,000; each `sh -c 'sleep 600; sleep 600; sleep 600'`, a 1 h idle timeout, the
//! default configuration: a cgroup per session where one can be had).
//!
//! - `spawn_scale/<n>/all`: the time to start the `n`, one after the other;
//! - `spawn_scale/<n>/one_more`: 20 more starts (`sleep 600`) at that load, each
//!   `Session::spawn` timed alone: median and max of its wall time and of the calling thread's
//!   CPU time (the start's own cost, steady on a loaded machine: the fork's page-table copy is
//!   the parent's kernel time);
//! - `spawn_scale/<n>/std_path`: for comparison, at the same load, 20 more starts of a
//!   caller's `std::process::Command` (`sleep 600`): std's path, which forks this process to
//!   run the hook, whose `clone3` into the cgroup copies that copy again — every start before
//!   issue 50 — each `Session::spawn` timed alone (alternating with the above): median and max.
//!
//! Run: `cargo bench --bench spawn` (`SPAWN_BENCH_SESSIONS=100` for one size). The process
//! raises its soft descriptor limit to the hard one (each session holds about 4).

use std::time::{Duration, Instant};

use quietus::{MonitorConfig, Program, Session};

/// Median and max of `times`, in ms.
fn spread(times: &mut [Duration]) -> String {
    times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "median {:.2} ms, max {:.2} ms",
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    )
}

/// Runs `spawn`, pushing its wall time and the calling thread's CPU time (what the start
/// costs this process, whatever else the machine runs), and returns its session.
fn timed(
    spawn: impl FnOnce() -> Result<Session, quietus::SpawnError>,
    wall: &mut Vec<Duration>,
    cpu: &mut Vec<Duration>,
) -> Session {
    let thread_cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let (start, start_cpu) = (Instant::now(), thread_cpu());
    let session = spawn().expect("sleep runs");
    wall.push(start.elapsed());
    cpu.push(thread_cpu().saturating_sub(start_cpu));
    session
}

fn config() -> MonitorConfig {
    MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(3600))
        .build()
        .expect("a valid configuration")
}

/// One measurement at `n` sessions.
fn scale_at(n: usize) {
    const MORE: usize = 20;
    let mut held = Vec::with_capacity(n + MORE);
    let started = Instant::now();
    for _ in 0..n {
        let program = Program::new("sh").args(["-c", "sleep 600; sleep 600; sleep 600"]);
        held.push(Session::spawn(program, config()).expect("sh runs"));
    }
    let all = started.elapsed();
    let containment = held.first().and_then(|s| {
        let cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", s.pid())).ok()?;
        Some(cgroup.lines().find(|l| l.starts_with("0::"))?.to_owned())
    });
    std::thread::sleep(Duration::from_secs(2)); // the arming delays over
    let (mut direct, mut direct_cpu) = (Vec::new(), Vec::new());
    let (mut std_path, mut std_cpu) = (Vec::new(), Vec::new());
    for _ in 0..MORE {
        let program = Program::new("sleep").arg("600");
        held.push(timed(
            || Session::spawn(program, config()),
            &mut direct,
            &mut direct_cpu,
        ));
        let mut command = std::process::Command::new("sleep");
        command.arg("600");
        held.push(timed(
            || Session::spawn(command, config()),
            &mut std_path,
            &mut std_cpu,
        ));
    }
    eprintln!(
        "spawn_scale/{n}/all: {n} sessions started in {:.2} s ({:.2} ms each on average; \
         the first in cgroup {})",
        all.as_secs_f64(),
        all.as_secs_f64() * 1000.0 / n as f64,
        containment.unwrap_or_default(),
    );
    eprintln!(
        "spawn_scale/{n}/one_more: {MORE} starts of a Program: wall {}; the calling thread's \
         CPU {}",
        spread(&mut direct),
        spread(&mut direct_cpu)
    );
    eprintln!(
        "spawn_scale/{n}/std_path: {MORE} starts of a caller's Command: wall {}; the calling \
         thread's CPU {}",
        spread(&mut std_path),
        spread(&mut std_cpu)
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("spawn_scale/{n}: machine load average {}", load.trim());
    for session in &held {
        session.kill();
    }
    for session in held {
        session.wait();
    }
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.is_some_and(|f| !"spawn_scale".contains(&f)) {
        return;
    }
    let (_, hard) = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .maximum
        .map_or((0, u64::MAX), |m| (0, m));
    let limit = rustix::process::Rlimit {
        current: Some(hard.min(1 << 20)),
        maximum: Some(hard),
    };
    let _ = rustix::process::setrlimit(rustix::process::Resource::Nofile, limit);
    let sizes: Vec<usize> = match std::env::var("SPAWN_BENCH_SESSIONS") {
        Ok(list) => list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect(),
        Err(_) => vec![100, 1000],
    };
    for n in sizes {
        scale_at(n);
    }
}
