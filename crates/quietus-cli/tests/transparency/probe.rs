//! The transparency suite's probe: prints what the process it runs in was started with, one
//! `key<TAB>value` line each, from `/proc/self` only (no libc, no shell), then `end`. Built by
//! the suite itself with `rustc` (tests/transparency/main.rs, `probe_path`).
//!
//! A C `main` (`#![no_main]`): std's runtime start is skipped, so the probe itself changes
//! nothing it reports (std would ignore SIGPIPE and catch SEGV and BUS before a Rust `main`).
//!
//! Bytes that are not printable ASCII (and `\`) are written as `\xNN`, so a non-UTF-8 argument
//! or variable is shown exactly and the dump is one line per item whatever it holds.

#![no_main]

use std::fs;
use std::io::Write;

fn escape(bytes: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

fn kind(target: &str) -> &'static str {
    if target.starts_with("pipe:") {
        "pipe"
    } else if target.starts_with("socket:") {
        "socket"
    } else if target.starts_with("/dev/pts/") || target == "/dev/ptmx" {
        "terminal"
    } else if target == "/dev/null" {
        "null"
    } else if target.starts_with("anon_inode:") {
        "anon"
    } else {
        "file"
    }
}

#[no_mangle]
extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    probe();
    0
}

fn probe() {
    let mut out = Vec::new();
    let mut line = |key: &str, value: String| {
        out.extend_from_slice(key.as_bytes());
        out.push(b'\t');
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    };
    let cmdline = fs::read("/proc/self/cmdline").unwrap_or_default();
    for arg in cmdline.strip_suffix(&[0]).unwrap_or(&cmdline).split(|b| *b == 0) {
        line("arg", escape(arg));
    }
    let environ = fs::read("/proc/self/environ").unwrap_or_default();
    let environ = environ.strip_suffix(&[0]).unwrap_or(&environ);
    if !environ.is_empty() {
        for entry in environ.split(|b| *b == 0) {
            line("env", escape(entry));
        }
    }
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    for wanted in [
        "SigBlk", "SigIgn", "SigCgt", "NoNewPrivs", "Seccomp", "CapInh", "CapPrm", "CapEff",
        "CapBnd", "CapAmb", "Cpus_allowed_list", "Mems_allowed_list", "Umask",
    ] {
        let value = status
            .lines()
            .find_map(|l| l.strip_prefix(wanted)?.strip_prefix(':'))
            .map_or("-".to_owned(), |v| v.trim().to_owned());
        line(wanted, value);
    }
    // /proc/self/stat: fields after the name, "(comm)" may hold spaces.
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let (head, rest) = stat.rsplit_once(')').unwrap_or(("", ""));
    let pid = head.split_whitespace().next().unwrap_or("-").to_owned();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied().unwrap_or("-").to_owned();
    line("pid", pid);
    line("ppid", field(4));
    line("pgrp", field(5));
    line("session", field(6));
    line("tty_nr", field(7));
    line("tpgid", field(8));
    line("nice", field(19));
    line("rt_priority", field(40));
    line("policy", field(41));
    for file in ["oom_score_adj", "personality", "loginuid", "timerslack_ns"] {
        let value = fs::read_to_string(format!("/proc/self/{file}")).unwrap_or("-".into());
        line(file, value.trim().to_owned());
    }
    for cgroup in fs::read_to_string("/proc/self/cgroup").unwrap_or_default().lines() {
        line("cgroup", cgroup.to_owned());
    }
    let cwd = fs::read_link("/proc/self/cwd").map_or("-".into(), |p| {
        escape(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
    });
    line("cwd", cwd);
    for limit in fs::read_to_string("/proc/self/limits").unwrap_or_default().lines().skip(1) {
        line("limit", limit.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    // The descriptors: listed first (the listing's own descriptor is open meanwhile), then
    // each resolved; the listing's, closed by then, resolves to nothing and is left out.
    let mut numbers: Vec<u32> = fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    numbers.sort_unstable();
    for n in numbers {
        if let Ok(target) = fs::read_link(format!("/proc/self/fd/{n}")) {
            let target = target.to_string_lossy().into_owned();
            line("fd", format!("{n} {} {}", kind(&target), escape(target.as_bytes())));
        }
    }
    line("end", String::new());
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(&out);
    let _ = stdout.flush();
}
