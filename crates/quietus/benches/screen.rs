//! The cost of judging a terminal session by its screen (issue 48 item 9): three terminal
//! emulators compared on the bytes a real TUI writes, and the output source's own model (the
//! chosen emulator and a fingerprint of the screen's text per chunk).
//!
//! Inputs: `claude_stalled`, real Claude Code 2.1 in a 120 x 40 terminal (its start, a prompt,
//! then 110 s of its spinner over a stalled model stream: 38.6 KB as `script` recorded it,
//! split into the 1,333 writes it made), replayed 10 times; `log`, 4 MiB of coloured log lines
//! (`ls --color -l`-like, SGR colours, every line new) in 4 KiB reads, as a terminal delivers a
//! chatty build.
//!
//! Run with `cargo bench -p quietus --bench screen` (about a minute). Throughput is in bytes.

use std::num::NonZeroU16;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const CLAUDE: &[u8] = include_bytes!("../src/sources/screen/claude_stalled.tty");
const ROWS: u16 = 40;
const COLS: u16 = 120;

/// The recording split into the writes the program made (a frame ends with a cursor move up
/// or a title's BEL).
fn claude_chunks() -> Vec<&'static [u8]> {
    let once: Vec<&[u8]> = CLAUDE
        .split_inclusive(|b| *b == 0x07 || *b == b'A')
        .collect();
    (0..10).flat_map(|_| once.iter().copied()).collect()
}

fn log_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    let mut n = 0u64;
    while out.len() < 4 << 20 {
        n += 1;
        out.extend_from_slice(
            format!(
                "\x1b[32m-rw-r--r--\x1b[0m 1 user user {:>8} Nov 28 10:{:02} \x1b[1;34mfile_{n}.rs\x1b[0m compiled in {}ms\r\n",
                n * 37 % 100_000,
                n % 60,
                n % 997
            )
            .as_bytes(),
        );
    }
    out
}

fn vt100_parse(chunks: &[&[u8]]) -> usize {
    let size = |n| NonZeroU16::new(n).unwrap();
    let mut parser = vt100::Parser::new(size(ROWS), size(COLS), 0);
    for chunk in chunks {
        parser.process(chunk);
    }
    parser.screen().cursor_position().0 as usize
}

fn avt_parse(chunks: &[&[u8]]) -> usize {
    let mut term = avt::Terminal::new(COLS as usize, ROWS as usize).unwrap();
    // avt takes text: the bytes decoded, an incomplete character kept for the next read.
    let mut carry: Vec<u8> = Vec::new();
    for chunk in chunks {
        carry.extend_from_slice(chunk);
        let valid = match std::str::from_utf8(&carry) {
            Ok(_) => carry.len(),
            Err(e) => e.valid_up_to(),
        };
        term.feed(std::str::from_utf8(&carry[..valid]).unwrap());
        carry.drain(..valid);
        if carry.len() > 3 {
            carry.clear();
        }
    }
    term.cursor_position().col
}

struct Size;

impl alacritty_terminal::grid::Dimensions for Size {
    fn total_lines(&self) -> usize {
        ROWS as usize
    }
    fn screen_lines(&self) -> usize {
        ROWS as usize
    }
    fn columns(&self) -> usize {
        COLS as usize
    }
}

fn alacritty_parse(chunks: &[&[u8]]) -> usize {
    use alacritty_terminal::event::VoidListener;
    use alacritty_terminal::term::{Config, Term};
    let mut term = Term::new(Config::default(), &Size, VoidListener);
    let mut parser: alacritty_terminal::vte::ansi::Processor = Default::default();
    for chunk in chunks {
        parser.advance(&mut term, chunk);
    }
    term.grid().cursor.point.column.0
}

fn bench(c: &mut Criterion) {
    let claude = claude_chunks();
    let log = log_bytes();
    let log_chunks: Vec<&[u8]> = log.chunks(4096).collect();
    for (name, chunks) in [("claude_stalled", &claude), ("log", &log_chunks)] {
        let bytes: usize = chunks.iter().map(|c| c.len()).sum();
        let mut group = c.benchmark_group(format!("screen/{name}"));
        group.throughput(Throughput::Bytes(bytes as u64));
        group.sample_size(10);
        group.bench_function("vt100", |b| b.iter(|| vt100_parse(chunks)));
        group.bench_function("avt", |b| b.iter(|| avt_parse(chunks)));
        group.bench_function("alacritty_terminal", |b| b.iter(|| alacritty_parse(chunks)));
        // The output source's model: the frames 150 ms apart (as written), and every chunk at
        // once (the worst case: a fingerprint per chunk when nothing changes, one per settle
        // time when something does).
        group.bench_function("quietus_screen_paced", |b| {
            b.iter(|| {
                quietus::sources::screen_changes(ROWS, COLS, chunks, Duration::from_millis(150))
            })
        });
        group.bench_function("quietus_screen_burst", |b| {
            b.iter(|| quietus::sources::screen_changes(ROWS, COLS, chunks, Duration::ZERO))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
