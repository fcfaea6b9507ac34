//! The settings table itself: one row per setting ([`Def`]), in the order the command's
//! help shows them. Adding a setting is one row here whose `apply` calls the library's setter;
//! a surface that does not offer it says why ([`Key::Not`]).

use std::time::Duration;

use quietus::error::Setting;

use super::def::{Def, Default, Item, Key, Kind, SettingValue};

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
const DAY: u64 = 24 * 3600;

/// Why `mcp` does not offer a setting: a model is given the few a command needs.
const MCP_FEW: &str =
    "exec_command gives a model the timeouts, the grace and observe; the rest keep their defaults";
/// Why `serve` and `mcp` do not offer the check interval.
const DEFAULT_CHECK: &str = "the library's: idle timeout / 10, kept in 100ms..30s";
/// Why `serve` and `mcp` do not offer completion's settings.
const NO_COMPLETION: &str = "no completion rule here: the client ends a finished program itself";
/// Why `serve` and `mcp` do not offer keeping leftovers.
const LEFTOVERS_ENDED: &str = "a session's leftovers are always ended with it";
/// Why `serve` and `mcp` do not offer the exit statuses.
const OWN_EXIT: &str =
    "the command's own exit status; the answer gives the outcome and the program's exit code";
/// Why `serve` and `mcp` do not offer the first signal.
const LADDER_TERM: &str =
    "the ladder starts with TERM; the controls send INT (send_ctrl_c) or KILL (force_kill)";
/// Why `serve` and `mcp` do not offer exclusions.
const DEFAULT_EXCLUDES: &str = "the default exclusions hold: *.log, *.swp, *~, .#*";
/// Why `serve` and `mcp` do not offer solo caps.
const DEFAULT_CAPS: &str = "the default cap holds: children=30m";
/// Why `serve` and `mcp` do not offer probes.
const NO_PROBE: &str = "a probe is a shell command run by quietus: a client asks its own";
/// Why `serve` and `mcp` do not offer the containment mode.
const AUTO_CONTAINMENT: &str = "auto: a cgroup where one can be made, else the process group";

/// Every setting, in the order the command's help shows them.
pub(crate) const SETTINGS: &[Def] = &[
    Def {
        name: "idle_timeout",
        setting: Some(Setting::IdleTimeout),
        kind: Kind::Duration,
        range: Some((ms(1), secs(7 * DAY))),
        default: Default::Value("5m"),
        flag: Key::On("idle-timeout"),
        short: Some('i'),
        env: Some("QUIETUS_IDLE_TIMEOUT"),
        serve: Key::On("idleTimeoutMs"),
        mcp: Key::On("idle_timeout_ms"),
        mcp_range: Some((secs(1), secs(DAY))),
        doc: "End the program when every source (output, files, children, network) has been quiet this long.",
        long_doc: "Durations: 1500ms, 30s, 5m, 1h30m (a bare number is seconds).\nExample: -i 10m",
        apply: |d, v| d.with(|c| c.idle_timeout(v.duration())),
    },
    Def {
        name: "hard_timeout",
        setting: Some(Setting::HardTimeout),
        kind: Kind::DurationOrNone,
        range: Some((ms(1), secs(366 * DAY))),
        default: Default::Value("none"),
        flag: Key::On("hard-timeout"),
        short: Some('t'),
        env: Some("QUIETUS_HARD_TIMEOUT"),
        serve: Key::On("hardTimeoutMs"),
        mcp: Key::On("hard_timeout_ms"),
        mcp_range: Some((secs(1), secs(366 * DAY))),
        doc: "End the program after this long even while it is active.",
        long_doc: "`none` turns off a hard timeout set in the environment.\nExample: -t 2h",
        apply: |d, v| d.with(|c| c.hard_timeout(v.maybe())),
    },
    Def {
        name: "input_wait_timeout",
        setting: Some(Setting::InputWaitTimeout),
        kind: Kind::DurationOrNone,
        range: Some((ms(100), secs(DAY))),
        default: Default::Value("none"),
        flag: Key::On("input-wait-timeout"),
        short: None,
        env: Some("QUIETUS_INPUT_WAIT_TIMEOUT"),
        serve: Key::On("inputWaitTimeoutMs"),
        mcp: Key::Not(MCP_FEW),
        mcp_range: None,
        doc: "End the program once its whole tree has waited on input this long, every source quiet.",
        long_doc: "Blocked reading its stdin or a terminal (a pager, an editor, a\n\
                   password prompt), its read count unchanged: the outcome is\n\
                   input_wait, exit status 124, after an input_wait event.\n\
                   Example: --input-wait-timeout 10s",
        apply: |d, v| d.with(|c| c.input_wait_timeout(v.maybe())),
    },
    Def {
        name: "input_wait_notice",
        setting: Some(Setting::InputWaitNotice),
        kind: Kind::DurationOrNone,
        range: Some((ms(100), secs(DAY))),
        default: Default::Value("none"),
        flag: Key::On("input-wait-notice"),
        short: None,
        env: Some("QUIETUS_INPUT_WAIT_NOTICE"),
        serve: Key::On("inputWaitNoticeMs"),
        mcp: Key::Not(MCP_FEW),
        mcp_range: None,
        doc: "Send an input_wait event once the whole tree has waited on input this long, and let it go on.",
        long_doc: "Once per episode (new input, or activity of any source, ends one), to\n\
                   the --events stream: a harness can answer the prompt or give up. With\n\
                   --input-wait-timeout too, the program is ended at that timeout.\n\
                   Example: --input-wait-notice 3s --events -",
        apply: |d, v| d.with(|c| c.input_wait_notice(v.maybe())),
    },
    Def {
        name: "grace",
        setting: Some(Setting::KillLadderGrace),
        kind: Kind::Duration,
        range: Some((Duration::ZERO, secs(3600))),
        default: Default::Value("5s"),
        flag: Key::On("grace"),
        short: Some('g'),
        env: Some("QUIETUS_GRACE"),
        serve: Key::On("gracePeriodMs"),
        mcp: Key::On("grace_period_ms"),
        mcp_range: Some((Duration::ZERO, secs(600))),
        doc: "Time between the first signal and KILL, for the program to clean up.",
        long_doc: "0 sends KILL right after the first signal.\nExample: -g 30s",
        apply: |mut d, v| {
            d.grace = Some(v.duration());
            d
        },
    },
    Def {
        name: "check_interval",
        setting: Some(Setting::CheckInterval),
        kind: Kind::Duration,
        range: Some((ms(10), secs(3600))),
        default: Default::Words("idle timeout / 10, kept in 100ms..30s"),
        flag: Key::On("check-interval"),
        short: None,
        env: Some("QUIETUS_CHECK_INTERVAL"),
        serve: Key::Not(DEFAULT_CHECK),
        mcp: Key::Not(DEFAULT_CHECK),
        mcp_range: None,
        doc: "How often the descendants' CPU and network are sampled.",
        long_doc: "Also the stat-scan interval of watched folders when the OS is out of file watches.\n\
                   Example: --check-interval 2s",
        apply: |d, v| d.with(|c| c.check_interval(v.maybe())),
    },
    Def {
        name: "drain_cap",
        setting: Some(Setting::DrainCap),
        kind: Kind::Duration,
        range: Some((Duration::ZERO, secs(600))),
        default: Default::Value("2s"),
        flag: Key::On("drain-cap"),
        short: None,
        env: Some("QUIETUS_DRAIN_CAP"),
        serve: Key::On("drainCapMs"),
        mcp: Key::Not(MCP_FEW),
        mcp_range: None,
        doc: "After the program exits, how long at most to read output from pipes a leftover process still holds open.",
        long_doc: "A pipe nobody holds open any more is read to its end whatever the cap.\n\
                   Example: --drain-cap 10s",
        apply: |d, v| d.with(|c| c.drain_cap(v.duration())),
    },
    Def {
        name: "linger",
        setting: Some(Setting::CompletionLinger),
        kind: Kind::Duration,
        range: Some((Duration::ZERO, secs(3600))),
        default: Default::Value("5s"),
        flag: Key::On("linger"),
        short: None,
        env: Some("QUIETUS_LINGER"),
        serve: Key::Not(NO_COMPLETION),
        mcp: Key::Not(NO_COMPLETION),
        mcp_range: None,
        doc: "Once the work is done, how long the program may take to exit by itself.",
        long_doc: "Example: --linger 10s",
        apply: |mut d, v| {
            d.completion = d.completion.linger(v.duration());
            d
        },
    },
    Def {
        name: "keep_leftovers",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: they are ended"),
        flag: Key::On("keep-leftovers"),
        short: None,
        env: Some("QUIETUS_KEEP_LEFTOVERS"),
        serve: Key::Not(LEFTOVERS_ENDED),
        mcp: Key::Not(LEFTOVERS_ENDED),
        mcp_range: None,
        doc: "Leave the program's leftover process-group members running after it exits.",
        long_doc: "By default they are ended with the same ladder: a finished program leaves nothing.\n\
                   Example: --keep-leftovers",
        apply: |d, v| d.with(|c| c.keep_leftovers(v.on())),
    },
    Def {
        name: "observe",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: quietus ends what stalls"),
        flag: Key::On("observe"),
        short: None,
        env: Some("QUIETUS_OBSERVE"),
        serve: Key::On("observe"),
        mcp: Key::On("observe"),
        mcp_range: None,
        doc: "Observe only: end nothing, say when and why quietus would have.",
        long_doc: "The idle timeout, the hard timeout, an input wait and completion's linger are\n\
                   recorded instead (a `quietus: would have ended …` line at the moment and at the end,\n\
                   an `observed` event, the report's `observed`); the program runs to its own end and\n\
                   quietus exits with its status. Its own exit and its leftovers are handled as always.\n\
                   Example: --observe -i 5m --events -",
        apply: |d, v| d.with(|c| c.observe(v.on())),
    },
    Def {
        name: "no_watch",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: file activity counts"),
        flag: Key::On("no-watch"),
        short: None,
        env: Some("QUIETUS_NO_WATCH"),
        serve: Key::On("noWatch"),
        mcp: Key::Not(MCP_FEW),
        mcp_range: None,
        doc: "File activity does not count (no folder is watched, whatever --watch says).",
        long_doc: "Example: --no-watch",
        apply: |d, v| d.with(|c| c.watch_files(!v.on())),
    },
    Def {
        name: "no_children",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: descendants' CPU counts"),
        flag: Key::On("no-children"),
        short: None,
        env: Some("QUIETUS_NO_CHILDREN"),
        serve: Key::On("noChildren"),
        mcp: Key::Not(MCP_FEW),
        mcp_range: None,
        doc: "CPU progress of the program's descendants does not count.",
        long_doc: "By default a busy grandchild (a compiler, a test run) keeps a silent program alive.\n\
                   Example: --no-children",
        apply: |d, v| d.with(|c| c.watch_children(!v.on())),
    },
    Def {
        name: "no_network",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: TCP bytes count"),
        flag: Key::On("no-network"),
        short: None,
        env: Some("QUIETUS_NO_NETWORK"),
        serve: Key::On("noNetwork"),
        mcp: Key::Not(MCP_FEW),
        mcp_range: None,
        doc: "Bytes moving on the program's TCP sockets do not count.",
        long_doc: "By default a silent download or a streamed answer (any process of the tree receiving\n\
                   or sending more than 1 KiB within 10s) keeps the program alive; an open connection\n\
                   that moves nothing does not. Linux socket diagnostics; elsewhere reported unavailable.\n\
                   Example: --no-network",
        apply: |d, v| d.with(|c| c.watch_network(!v.on())),
    },
    Def {
        name: "no_output",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: output counts"),
        flag: Key::On("no-output"),
        short: None,
        env: Some("QUIETUS_NO_OUTPUT"),
        serve: Key::On("noOutput"),
        mcp: Key::Not(MCP_FEW),
        mcp_range: None,
        doc: "Output does not count as activity (it still passes through).",
        long_doc: "With --no-watch --no-children --no-network too, -i is a plain timeout.\n\
                   Example: --no-output",
        apply: |d, v| d.with(|c| c.watch_output(!v.on())),
    },
    Def {
        name: "signal",
        setting: Some(Setting::KillLadder),
        kind: Kind::Signal,
        range: None,
        default: Default::Value("TERM"),
        flag: Key::On("signal"),
        short: Some('s'),
        env: Some("QUIETUS_SIGNAL"),
        serve: Key::Not(LADDER_TERM),
        mcp: Key::Not(LADDER_TERM),
        mcp_range: None,
        doc: "The first signal of the ladder, sent to the program's whole tree.",
        long_doc: "A name with or without SIG, or a number: TERM, INT, HUP, 15, SIGUSR1.\n\
                   KILL skips the ladder: KILL at once.\n\
                   Refused: STOP, TSTP, TTIN, TTOU, CONT, CHLD, WINCH, URG (they end nothing).\n\
                   Example: -s INT",
        apply: |mut d, v| {
            if let SettingValue::Signal(signal) = v {
                d.signal = Some(signal);
            }
            d
        },
    },
    Def {
        name: "watch",
        setting: None,
        kind: Kind::List(Item::Folder),
        range: None,
        default: Default::Words(".agent"),
        flag: Key::On("watch"),
        short: Some('w'),
        env: Some("QUIETUS_WATCH"),
        serve: Key::On("watch"),
        mcp: Key::Not(MCP_FEW),
        mcp_range: None,
        doc: "Folders whose file activity counts, in place of the default .agent.",
        long_doc: "Watched recursively. Relative paths start from the current directory. A folder that\n\
                   does not exist yet is picked up when it is created. Creating, changing, renaming or\n\
                   removing a file counts; reading never does.\n\
                   Example: -w .agent -w notes",
        apply: |d, v| match v {
            SettingValue::Paths(roots) => d.with_files(|f| f.roots(roots)),
            _ => d,
        },
    },
    Def {
        name: "exclude",
        setting: Some(Setting::FilesExclude),
        kind: Kind::List(Item::Glob),
        range: None,
        default: Default::Words("none beyond the built-in *.log, *.swp, *~, .#*"),
        flag: Key::On("exclude"),
        short: None,
        env: Some("QUIETUS_EXCLUDE"),
        serve: Key::Not(DEFAULT_EXCLUDES),
        mcp: Key::Not(DEFAULT_EXCLUDES),
        mcp_range: None,
        doc: "Files under the watched folders whose activity does not count; repeatable.",
        long_doc: "Added to the defaults: *.log, *.swp, *~, .#*. A glob matches the path under its\n\
                   folder and the bare file name.\n\
                   Example: --exclude 'cache/**' --exclude '*.tmp'",
        apply: |d, v| match v {
            SettingValue::Texts(globs) => {
                d.with_files(|f| globs.into_iter().fold(f, |f, glob| f.exclude(glob)))
            }
            _ => d,
        },
    },
    Def {
        name: "done_when_output",
        setting: Some(Setting::CompletionOutput),
        kind: Kind::List(Item::Regex),
        range: None,
        default: Default::Words("none: the program ends by itself"),
        flag: Key::On("done-when-output"),
        short: None,
        env: Some("QUIETUS_DONE_WHEN_OUTPUT"),
        serve: Key::Not(NO_COMPLETION),
        mcp: Key::Not(NO_COMPLETION),
        mcp_range: None,
        doc: "The work is done when a line of output matches this regular expression; repeatable.",
        long_doc: "Matched against every line of stdout and stderr (or the terminal), whole, even when it\n\
                   arrives in pieces. Then the program has --linger to exit by itself; if it does not, it\n\
                   is ended and quietus exits 0 (outcome `completed`). A program that exits by itself\n\
                   keeps its own exit status. QUIETUS_DONE_WHEN_OUTPUT holds one expression (use | for\n\
                   several).\n\
                   Example: --done-when-output '^\\{\"type\":\"result\"'",
        apply: |mut d, v| {
            if let SettingValue::Texts(regexes) = v {
                d.completion = regexes.into_iter().fold(d.completion, |c, r| c.output(r));
            }
            d
        },
    },
    Def {
        name: "done_when_file",
        setting: Some(Setting::CompletionFiles),
        kind: Kind::List(Item::File),
        range: None,
        default: Default::Words("none: the program ends by itself"),
        flag: Key::On("done-when-file"),
        short: None,
        env: Some("QUIETUS_DONE_WHEN_FILE"),
        serve: Key::Not(NO_COMPLETION),
        mcp: Key::Not(NO_COMPLETION),
        mcp_range: None,
        doc: "The work is done when this file appears or changes; repeatable.",
        long_doc: "Relative to the current directory. A file already there at the start counts only once\n\
                   it changes. Looked at every check interval, at most every second. Then as with\n\
                   --done-when-output.\n\
                   Example: --done-when-file .agent/status.json",
        apply: |mut d, v| {
            if let SettingValue::Paths(files) = v {
                d.completion = files.into_iter().fold(d.completion, |c, f| c.file(f));
            }
            d
        },
    },
    Def {
        name: "solo_cap",
        setting: Some(Setting::SoloCap),
        kind: Kind::List(Item::SoloCap),
        range: None,
        default: Default::Words(
            "children=30m (a silent program whose grandchild spins forever is ended; a silent \
             build or test run shorter than that is not)",
        ),
        flag: Key::On("solo-cap"),
        short: None,
        env: Some("QUIETUS_SOLO_CAP"),
        serve: Key::Not(DEFAULT_CAPS),
        mcp: Key::Not(DEFAULT_CAPS),
        mcp_range: None,
        doc: "The longest one source may keep a quiet program alive on its own; repeatable.",
        long_doc: "SOURCE is output, files, children, repeated_output, keepalive or the NAME of a --probe;\n\
                   D a duration, or none for no cap. Past the idle timeout + D with every other source\n\
                   quiet, that source stops counting until another one is active, and the program is\n\
                   ended as stale. A value, like QUIETUS_SOLO_CAP, takes several, separated by ':'.\n\
                   repeated_output=D tells output that merely repeats itself (the same line, digits\n\
                   aside: a retry loop) from real output and caps it; a spinner redrawn in place (and,\n\
                   under --pty, a screen whose text did not change) then counts as repeated_output too,\n\
                   else not at all.\n\
                   Example: --solo-cap children=10m --solo-cap repeated_output=2m",
        apply: |d, v| match v {
            SettingValue::SoloCaps(caps) => d.with(|c| {
                caps.into_iter()
                    .fold(c, |c, cap| c.solo_cap(cap.source, cap.cap))
            }),
            _ => d,
        },
    },
    Def {
        name: "probe",
        setting: Some(Setting::Probes),
        kind: Kind::List(Item::Probe),
        range: None,
        default: Default::Words("none"),
        flag: Key::On("probe"),
        short: None,
        env: Some("QUIETUS_PROBE"),
        serve: Key::Not(NO_PROBE),
        mcp: Key::Not(NO_PROBE),
        mcp_range: None,
        doc: "A probe: COMMAND (run with sh -c) says whether the program is still busy; repeatable.",
        long_doc: "Asked only when the program is about to be ended as stale (at most once per check\n\
                   interval while it says yes): exit status 0 counts as activity of the source NAME\n\
                   (which --solo-cap can cap). It runs in a process group of its own with no input and\n\
                   its output discarded, for 10s at most (then it is killed and counts as no).\n\
                   Example: --probe ci_job='gh run view 42 --json status | grep -q in_progress'",
        apply: |d, v| match v {
            SettingValue::Probes(probes) => {
                d.with(|c| probes.iter().fold(c, |c, p| c.probe(p.probe())))
            }
            _ => d,
        },
    },
    Def {
        name: "containment",
        setting: None,
        kind: Kind::Containment,
        range: None,
        default: Default::Value("auto"),
        flag: Key::On("containment"),
        short: None,
        env: Some("QUIETUS_CONTAINMENT"),
        serve: Key::Not(AUTO_CONTAINMENT),
        mcp: Key::Not(AUTO_CONTAINMENT),
        mcp_range: None,
        doc: "How the program's process tree is held: auto, cgroup or group.",
        long_doc: "cgroup: a cgroup v2 of the run's own, entered before the program starts; no process of\n\
                   the tree can leave it (setsid, double fork, env -i), its CPU counts, and all of it is\n\
                   ended. Needs the right to create a cgroup under quietus's own (root, or a delegated\n\
                   one: systemd-run --user --scope -p Delegate=yes quietus …); without it, exit 125.\n\
                   group: the process group, plus the descendants seen leaving it.\n\
                   auto (default): cgroup where one can be made, else group; the report says which.\n\
                   Example: --containment cgroup",
        apply: |d, v| match v {
            SettingValue::Containment(mode) => d.with(|c| c.containment(mode)),
            _ => d,
        },
    },
    Def {
        name: "exit_code_stall",
        setting: None,
        kind: Kind::ExitCode,
        range: None,
        default: Default::Value("124"),
        flag: Key::On("exit-code-stall"),
        short: None,
        env: Some("QUIETUS_EXIT_CODE_STALL"),
        serve: Key::Not(OWN_EXIT),
        mcp: Key::Not(OWN_EXIT),
        mcp_range: None,
        doc: "quietus's exit status when it ended a stalled program (idle timeout).",
        long_doc: "For an engine that acts on exit codes alone (a Kubernetes podFailurePolicy, a\n\
                   CI retry rule): a stall retried, a hard timeout failed. docs/fleet.md.\n\
                   Example: --exit-code-stall 75",
        apply: |d, _| d,
    },
    Def {
        name: "exit_code_hard_timeout",
        setting: None,
        kind: Kind::ExitCode,
        range: None,
        default: Default::Value("124"),
        flag: Key::On("exit-code-hard-timeout"),
        short: None,
        env: Some("QUIETUS_EXIT_CODE_HARD_TIMEOUT"),
        serve: Key::Not(OWN_EXIT),
        mcp: Key::Not(OWN_EXIT),
        mcp_range: None,
        doc: "quietus's exit status when it ended the program at the hard timeout.",
        long_doc: "Example: --exit-code-hard-timeout 76",
        apply: |d, _| d,
    },
    Def {
        name: "exit_code_input_wait",
        setting: None,
        kind: Kind::ExitCode,
        range: None,
        default: Default::Value("124"),
        flag: Key::On("exit-code-input-wait"),
        short: None,
        env: Some("QUIETUS_EXIT_CODE_INPUT_WAIT"),
        serve: Key::Not(OWN_EXIT),
        mcp: Key::Not(OWN_EXIT),
        mcp_range: None,
        doc: "quietus's exit status when it ended the program at the input-wait timeout.",
        long_doc: "Example: --exit-code-input-wait 77",
        apply: |d, _| d,
    },
];
