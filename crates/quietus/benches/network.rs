//! Cost of one network sample (issue 18: at most 300 µs for a 10-process tree holding 50
//! sockets, in a namespace with 1,000 TCP sockets; nothing extra while the tree holds none).
//!
//! The bench listens on 127.0.0.1, starts 10 `bash` processes that each open 5 connections
//! (50 sockets in the tree, 50 more accepted by the bench): one to a control port, on which
//! each waits for a byte and answers one, and four to the main port. Then it opens connection
//! pairs of its own until the namespace holds about 1,000 TCP sockets. Three lines:
//!
//! - `tree_of_10_with_50_sockets…`: the tree asleep (a process's `/proc/PID/fd` walk stands
//!   while it has not run since);
//! - `…_every_process_ran…`: before each sample every process of the tree is woken (a byte on
//!   its control connection, its answer awaited, then its sleep again; outside the timing), so
//!   that every one is walked again: the cost of a tree whose processes all ran;
//! - `tree_of_10_without_sockets…`: ten sleeping processes holding no socket.
//!
//! It kills exactly the processes it started, by pid, when it is done.
//!
//! Run: `cargo bench --bench network`

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use quietus::Pid;
use quietus::sources::NetworkObserver;

/// A `bash` holding a control connection (fd 3) and 4 connections to `port` (fds 4..7),
/// answering each byte on fd 3 with one; or, without ports, holding none and sleeping.
fn holder(ports: Option<(u16, u16)>) -> Child {
    let script = match ports {
        Some((control, port)) => {
            let mut s = format!("exec 3<>/dev/tcp/127.0.0.1/{control}; ");
            for fd in 4..8 {
                s += &format!("exec {fd}<>/dev/tcp/127.0.0.1/{port}; ");
            }
            s + "echo ready; while read -r -n 1 x <&3; do printf y >&3; done"
        }
        None => "echo ready; exec sleep 1000".to_owned(),
    };
    let mut child = Command::new("bash")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn a holder");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("ready line");
    child
}

/// Accepts `n` connections on `listener`, in a thread.
fn accept(listener: TcpListener, n: usize) -> std::thread::JoinHandle<Vec<TcpStream>> {
    std::thread::spawn(move || {
        listener
            .incoming()
            .take(n)
            .map(|c| c.expect("accept"))
            .collect()
    })
}

/// Wakes every process of the tree (a byte to each, its answer read back), then waits until
/// each sleeps again: they ran since the last sample, and do not compete with the next.
fn wake(control: &mut [TcpStream], pids: &[Pid]) {
    for conn in control.iter_mut() {
        conn.write_all(b"x").expect("poke");
    }
    for conn in control.iter_mut() {
        conn.read_exact(&mut [0]).expect("answer");
    }
    for pid in pids {
        while !asleep(*pid) {
            std::thread::yield_now();
        }
    }
}

/// Whether process `pid` sleeps (state `S` in `/proc/PID/stat`).
fn asleep(pid: Pid) -> bool {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap_or_default();
    let close = stat.iter().rposition(|b| *b == b')').unwrap_or(0);
    stat.get(close + 2) == Some(&b'S')
}

fn bench(c: &mut Criterion) {
    let control = TcpListener::bind("127.0.0.1:0").expect("bind");
    let main = TcpListener::bind("127.0.0.1:0").expect("bind");
    let ports = (
        control.local_addr().expect("address").port(),
        main.local_addr().expect("address").port(),
    );
    let controls = accept(control, 10);
    let accepting = accept(main, 40 + 475);
    let tree: Vec<Child> = (0..10).map(|_| holder(Some(ports))).collect();
    // 475 more pairs of the bench's own: about 1,000 TCP sockets with the tree's 100.
    let own: Vec<TcpStream> = (0..475)
        .map(|_| TcpStream::connect(("127.0.0.1", ports.1)).expect("connect"))
        .collect();
    let accepted = accepting.join().expect("acceptor");
    let mut control = controls.join().expect("acceptor");
    let pids: Vec<Pid> = tree.iter().map(Pid::of).collect();

    let mut group = c.benchmark_group("network_sample");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let mut observer = NetworkObserver::open().expect("socket diagnostics");
    let first = observer.sample(Instant::now(), &pids);
    assert_eq!(first.sockets, 50, "the tree's 50 sockets are found");
    group.bench_function("tree_of_10_with_50_sockets_1000_in_namespace", |b| {
        b.iter(|| observer.sample(Instant::now(), &pids))
    });
    group.bench_function(
        "tree_of_10_with_50_sockets_every_process_ran_1000_in_namespace",
        |b| {
            b.iter_batched(
                || wake(&mut control, &pids),
                |()| observer.sample(Instant::now(), &pids),
                BatchSize::PerIteration,
            )
        },
    );
    assert_eq!(observer.sample(Instant::now(), &pids).sockets, 50);

    let bare: Vec<Child> = (0..10).map(|_| holder(None)).collect();
    let bare_pids: Vec<Pid> = bare.iter().map(Pid::of).collect();
    let mut observer = NetworkObserver::open().expect("socket diagnostics");
    group.bench_function("tree_of_10_without_sockets_1000_in_namespace", |b| {
        b.iter(|| observer.sample(Instant::now(), &bare_pids))
    });
    group.finish();

    for mut child in tree.into_iter().chain(bare) {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop((own, accepted, control));
}

criterion_group!(benches, bench);
criterion_main!(benches);
