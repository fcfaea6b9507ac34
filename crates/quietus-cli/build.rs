//! Links the `quietus` command as a position-dependent executable on Linux.
//!
//! The command is started once per supervised run, thousands of times in an agent loop, and
//! its start is part of what it costs next to GNU `timeout` (docs/benchmarks.md). A
//! position-independent Rust executable has many relative relocations (about 15,000 here) that
//! the dynamic loader applies at every start, writing to (and so faulting in) every page of
//! `.data.rel.ro`: measured here, 187 page faults for `quietus --version` against 115 when
//! linked with `-no-pie` (`perf stat -r 100 -e page-faults target/release/quietus
//! --version`). The code stays position-independent (rustc's default); only the link resolves
//! it at a fixed address. What is given up is the randomized address of the
//! executable's own image; its libraries, heap, stacks and mappings stay randomized. Only the
//! binary is linked so: the library, and every program that embeds it, are untouched.
//!
//! Not for musl: Rust links a musl executable statically as a static-pie, whose start code
//! relocates itself; with `-no-pie` it is linked without that start code but with its
//! relocations unapplied, and dies of a segmentation fault before `main` (exit 139, `--version`
//! included). A static executable has no dynamic loader to pay at start anyway.
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env != "musl" {
        println!("cargo::rustc-link-arg-bins=-no-pie");
    }
}
