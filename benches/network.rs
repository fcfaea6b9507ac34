//! Cost of one network sample (issue 18: at most 300 µs for a 10-process tree holding 50
//! sockets, in a namespace with 1,000 TCP sockets; nothing extra while the tree holds none).
//!
//! The bench listens on 127.0.0.1, starts 10 `bash` processes that each open 5 connections to
//! it (50 sockets in the tree, 50 more accepted by the bench), then opens connection pairs of
//! its own until the namespace holds about 1,000 TCP sockets. It kills exactly the processes
//! it started, by pid, when it is done.
//!
//! Run: `cargo bench --bench network`

use std::io::BufRead;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use stallwatch::parts::NetworkObserver;

/// A `bash` holding `n` connections to `port` (fds 3..), then sleeping; or none.
fn holder(port: Option<u16>, n: usize) -> Child {
    let connect = match port {
        Some(port) => (3..3 + n)
            .map(|fd| format!("exec {fd}<>/dev/tcp/127.0.0.1/{port}; "))
            .collect::<String>(),
        None => String::new(),
    };
    let mut child = Command::new("bash")
        .args(["-c", &format!("{connect}echo ready; exec sleep 1000")])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn a holder");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("ready line");
    child
}

fn bench(c: &mut Criterion) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let accepting = std::thread::spawn(move || {
        let mut accepted = Vec::new();
        for conn in listener.incoming().take(50 + 475) {
            accepted.push(conn.expect("accept"));
        }
        accepted
    });
    let tree: Vec<Child> = (0..10).map(|_| holder(Some(port), 5)).collect();
    // 475 more pairs of the bench's own: about 1,000 TCP sockets with the tree's 100.
    let own: Vec<TcpStream> = (0..475)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
        .collect();
    let accepted = accepting.join().expect("acceptor");
    let pids: Vec<u32> = tree.iter().map(Child::id).collect();

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

    let bare: Vec<Child> = (0..10).map(|_| holder(None, 0)).collect();
    let bare_pids: Vec<u32> = bare.iter().map(Child::id).collect();
    let mut observer = NetworkObserver::open().expect("socket diagnostics");
    group.bench_function("tree_of_10_without_sockets_1000_in_namespace", |b| {
        b.iter(|| observer.sample(Instant::now(), &bare_pids))
    });
    group.finish();

    for mut child in tree.into_iter().chain(bare) {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(own);
    drop(accepted);
}

criterion_group!(benches, bench);
criterion_main!(benches);
