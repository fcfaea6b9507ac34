//! The parsers of the settings' values, the same on every surface: durations (one grammar,
//! [`parse_duration`]), signals, flags, globs, folders, solo caps, containment modes, exit
//! statuses; how a duration is written back ([`human`], [`exact_duration`],
//! [`round_duration`]); and the clap value parsers made of them ([`text`], [`path`]). Pure:
//! text in, a value or a message naming what is accepted out.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{OsStringValueParser, TypedValueParser};
use quietus::outcome::HumanDuration;
use quietus::{ActivitySource, Containment, Signal};

/// The separator of several values in one environment variable (`--watch`, `--exclude`).
pub(crate) const ENV_LIST_SEPARATOR: char = ':';

/// A limit as a person writes it: `7d`, `1h`, `10ms` (falls back to `1h2m3s` style).
pub(crate) fn round_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 || secs == 0 {
        return HumanDuration(d).to_string();
    }
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs.is_multiple_of(size) {
            return format!("{}{unit}", secs / size);
        }
    }
    HumanDuration(d).to_string()
}

/// `d` to the nanosecond, in the units a user writes (`7d1ms`, `1h30m`, `1s500ms`): a
/// rejected value is shown as it was written, never rounded into an accepted one.
pub(crate) fn exact_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let nanos = u64::from(d.subsec_nanos());
    let parts = [
        (secs / 86400, "d"),
        (secs / 3600 % 24, "h"),
        (secs / 60 % 60, "m"),
        (secs % 60, "s"),
        (nanos / 1_000_000, "ms"),
        (nanos / 1_000 % 1_000, "us"),
        (nanos % 1_000, "ns"),
    ];
    let text: String = parts
        .iter()
        .filter(|(n, _)| *n != 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if text.is_empty() {
        "0s".to_owned()
    } else {
        text
    }
}

/// A `--solo-cap SOURCE=D` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SoloCap {
    pub(crate) source: ActivitySource,
    pub(crate) cap: Option<Duration>,
}

/// `children=10m`, `output=none`.
pub(crate) fn parse_solo_cap(text: &str) -> Result<SoloCap, String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!(
            "{text:?} is not SOURCE=D: use children=10m, repeated_output=2m, output=none"
        ));
    };
    let name = name.trim();
    let probe_like = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !probe_like {
        return Err(format!(
            "{name:?} is not a source: use output, files, children, repeated_output, keepalive \
             or the NAME of a --probe"
        ));
    }
    // A built-in source, or a probe's name (checked against the probes with the rest).
    let source = ActivitySource::from_name(name);
    let cap = if value.trim().eq_ignore_ascii_case("none") {
        None
    } else {
        Some(parse_duration(value)?)
    };
    Ok(SoloCap { source, cap })
}

/// A flag's value from the environment: 1/0, true/false, yes/no, on/off (any case).
pub(crate) fn parse_flag(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "y" | "on" => Ok(true),
        "0" | "false" | "no" | "n" | "off" => Ok(false),
        _ => Err(format!(
            "{text:?} is not a yes or no: use 1/0, true/false, yes/no, on/off"
        )),
    }
}

/// Splits `a:b::c` into `a`, `b`, `c` (empty entries dropped).
pub(crate) fn split_list(text: &std::ffi::OsStr) -> Vec<OsString> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    text.as_bytes()
        .split(|b| *b == ENV_LIST_SEPARATOR as u8)
        .filter(|part| !part.is_empty())
        .map(|part| OsString::from_vec(part.to_vec()))
        .collect()
}

/// Parses a duration in quietus's one grammar (docs/cli.md, "Durations"), the same on every
/// surface: a bare number is seconds (`7`, `1.5`); otherwise one or more `NUMBER UNIT` parts,
/// the units `d`, `h`, `m`, `s`, `ms`, each at most once and from the largest down (`1h30m`,
/// `1s500ms`; not `1s1m` or `1m1m`); a number is digits with at most one point. The total is a
/// whole number of milliseconds (`1.5ms`, `0.0001s` are finer than quietus counts), and one
/// too large to hold is out of range, not "not a duration".
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let bad = || {
        let negative = if t
            .strip_prefix('-')
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
        {
            "a duration cannot be negative; "
        } else {
            ""
        };
        format!(
            "{text:?} is not a duration: {negative}use a number with a unit (d, h, m, s, ms, \
             from the largest down), like 1500ms, 30s, 5m, 1h30m"
        )
    };
    let is_number =
        |n: &str| n.contains(|c: char| c.is_ascii_digit()) && n.matches('.').count() <= 1;
    // The parts: (number, unit); a bare number is seconds.
    let mut parts = Vec::new();
    let mut rest = t;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(split);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        if !is_number(number) || (unit.is_empty() && !parts.is_empty()) {
            return Err(bad());
        }
        parts.push((number, unit));
        rest = tail;
    }
    let finer = || {
        format!(
            "{text:?} is finer than a millisecond: durations are whole milliseconds (1ms, \
             1500ms, 1.5s)"
        )
    };
    let too_long =
        || format!("{text:?} is out of range: longer than any duration quietus can hold");
    if parts.is_empty() {
        return Err(bad());
    }
    // Exact arithmetic in nanoseconds (u128): `0.1s` is 100ms, never 99.999….
    let mut total_ns: u128 = 0;
    let mut previous = u128::MAX;
    for (number, unit) in &parts {
        let scale_ns: u128 = match *unit {
            "" if parts.len() == 1 => 1_000_000_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => return Err(bad()),
        };
        if scale_ns >= previous {
            return Err(bad());
        }
        previous = scale_ns;
        let part = match part_ns(number, scale_ns) {
            Ok(ns) => ns,
            Err(PartError::TooLong) => return Err(too_long()),
            Err(PartError::Finer) => return Err(finer()),
        };
        total_ns = total_ns.checked_add(part).ok_or_else(too_long)?;
    }
    if !total_ns.is_multiple_of(1_000_000) {
        return Err(finer());
    }
    u64::try_from(total_ns / 1_000_000)
        .map(Duration::from_millis)
        .map_err(|_| too_long())
}

/// Why one part of a duration is refused.
enum PartError {
    /// More than a `u128` of nanoseconds holds.
    TooLong,
    /// Not a whole number of nanoseconds.
    Finer,
}

/// `number` (digits with at most one point) times `scale_ns`, exactly, in nanoseconds.
fn part_ns(number: &str, scale_ns: u128) -> Result<u128, PartError> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let mut value: u128 = 0;
    for d in whole.bytes().chain(fraction.bytes()) {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u128::from(d - b'0')))
            .ok_or(PartError::TooLong)?;
    }
    let scaled = value.checked_mul(scale_ns).ok_or(PartError::TooLong)?;
    let divisor = u32::try_from(fraction.len())
        .ok()
        .and_then(|n| 10u128.checked_pow(n))
        .ok_or(PartError::Finer)?;
    if !scaled.is_multiple_of(divisor) {
        return Err(PartError::Finer);
    }
    Ok(scaled / divisor)
}

/// A duration, or `none` (off).
pub(crate) fn parse_duration_or_none(text: &str) -> Result<Option<Duration>, String> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    parse_duration(text)
        .map(Some)
        .map_err(|e| format!("{e}, or none"))
}

/// `children=10m:output=none`: one or more `SOURCE=D`, separated by `:` (the one value of
/// `QUIETUS_SOLO_CAP` holds several).
pub(crate) fn parse_solo_caps(text: &str) -> Result<Vec<SoloCap>, String> {
    let caps: Vec<SoloCap> = text
        .split(ENV_LIST_SEPARATOR)
        .filter(|part| !part.trim().is_empty())
        .map(parse_solo_cap)
        .collect::<Result<_, _>>()?;
    if caps.is_empty() {
        return parse_solo_cap(text).map(|cap| vec![cap]);
    }
    Ok(caps)
}

/// The value parser of a duration option of the settings table.
pub(crate) fn duration_parser() -> impl TypedValueParser<Value = Duration> {
    text(parse_duration)
}

/// The value parser of a duration-or-`none` option of the settings table.
pub(crate) fn duration_or_none_parser() -> impl TypedValueParser<Value = Option<Duration>> {
    text(parse_duration_or_none)
}

/// The value parser of a flag of the settings table (its variable takes 1/0, yes/no…).
pub(crate) fn flag_parser() -> impl TypedValueParser<Value = bool> {
    text(parse_flag)
}

/// The signals whose default action does not end a process: it stops (STOP, TSTP, TTIN,
/// TTOU), goes on (CONT) or ignores them (CHLD, WINCH, URG). As the ladder's first signal,
/// each would only wait out the grace before KILL (or stop the program, not end it).
const NOT_ENDING: [&str; 8] = [
    "STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "WINCH", "URG",
];

/// `TERM`, `SIGTERM`, `term`, `15`; not a signal that cannot end a process ([`NOT_ENDING`]).
pub(crate) fn parse_signal(text: &str) -> Result<Signal, String> {
    let signal = text.parse::<Signal>().map_err(|_| {
        format!(
            "{text:?} is not a signal: use a name with or without SIG (TERM, INT, HUP, QUIT, \
             USR1…) or a number from 1 to 31"
        )
    })?;
    let name = signal.name();
    if NOT_ENDING
        .iter()
        .any(|n| name.trim_start_matches("SIG") == *n)
    {
        let shown = if text.trim().eq_ignore_ascii_case(&name) {
            format!("{text:?}")
        } else {
            format!("{text:?} ({name})")
        };
        return Err(format!(
            "{shown} does not end a program (by default it stops it, or nothing \
             happens): use TERM, INT, HUP, QUIT, USR1… or KILL"
        ));
    }
    Ok(signal)
}

/// A glob of `--exclude`: not empty (an empty one matches nothing).
pub(crate) fn parse_glob(glob: &str) -> Result<String, String> {
    if glob.trim().is_empty() {
        return Err(format!(
            "{glob:?} is an empty glob and matches nothing: give a pattern, like 'cache/**' or \
             '*.tmp'"
        ));
    }
    Ok(glob.to_owned())
}

pub(crate) fn parse_containment(text: &str) -> Result<Containment, String> {
    match text {
        "auto" => Ok(Containment::Auto),
        "cgroup" => Ok(Containment::Cgroup),
        "group" => Ok(Containment::Group),
        _ => Err(format!(
            "{text:?} is not a containment: use auto, cgroup or group"
        )),
    }
}

/// A value parser for text: `parse` on the value, which must be UTF-8 (the error then names
/// the option, or its variable, like any invalid value).
pub(crate) fn text<T: Clone + Send + Sync + 'static>(
    parse: fn(&str) -> Result<T, String>,
) -> impl TypedValueParser<Value = T> {
    OsStringValueParser::new().try_map(move |value| match value.to_str() {
        Some(text) => parse(text),
        None => Err(format!(
            "{:?} is not valid UTF-8, and this value must be text",
            value.to_string_lossy()
        )),
    })
}

/// A value parser for paths: any bytes (Linux paths need not be UTF-8), checked by `check`.
pub(crate) fn path(
    check: fn(&OsStr) -> Result<PathBuf, String>,
) -> impl TypedValueParser<Value = PathBuf> {
    OsStringValueParser::new().try_map(move |value| check(&value))
}

/// A non-empty folder to watch.
pub(crate) fn parse_watch(path: &OsStr) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("an empty path is not a folder: give one like .agent or notes".to_owned());
    }
    Ok(PathBuf::from(path))
}

/// The exit statuses a setting of [`Kind::ExitCode`](super::Kind::ExitCode) may not take: quietus's own failure, a
/// program that cannot be executed, a program not found (their meaning is fixed).
pub(crate) const RESERVED_EXIT_CODES: [u8; 3] = [125, 126, 127];
/// Reads an exit status for a [`Kind::ExitCode`](super::Kind::ExitCode) setting: 1..=255, not a reserved one.
pub(crate) fn parse_exit_code(text: &str) -> Result<u8, String> {
    let accepts = "it accepts a whole number from 1 to 255 but 125, 126 and 127 (quietus's own \
                   failure, a program that cannot be executed, one not found)";
    let code = text
        .trim()
        .parse::<u16>()
        .ok()
        .filter(|c| (1..=255).contains(c))
        .and_then(|c| u8::try_from(c).ok())
        .ok_or_else(|| format!("{text:?} is not an exit status; {accepts}"))?;
    if RESERVED_EXIT_CODES.contains(&code) {
        return Err(format!("{code} has a meaning of its own; {accepts}"));
    }
    Ok(code)
}
/// A duration as the command writes it: `1ms`, `7d`, `1h`, `0`.
pub(crate) fn human(d: Duration) -> String {
    let millis = d.as_millis();
    if millis == 0 {
        return "0".to_owned();
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86400)));
        for bad in ["", "5x", "ms", "-1s", "1h30", "abc", "1e400s", "s5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(
            parse_duration("-5s")
                .unwrap_err()
                .contains("cannot be negative")
        );
        assert!(!parse_duration("-v").unwrap_err().contains("negative"));
    }

    /// One grammar (issue 51, point 7): units from the largest down, each once; whole
    /// milliseconds; a number too large is out of range, not "not a duration".
    #[test]
    fn the_one_grammar_of_durations() {
        assert_eq!(parse_duration("1s500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(
            parse_duration("1d2h3m4s5ms"),
            Ok(Duration::from_millis(93_784_005))
        );
        assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("0.001"), Ok(Duration::from_millis(1)));
        for out_of_order in ["1s1m", "1m1m", "1ms1s", "5ms5ms", "1h1d"] {
            let e = parse_duration(out_of_order).unwrap_err();
            assert!(e.contains("is not a duration"), "{out_of_order}: {e}");
            assert!(e.contains("largest down"), "{out_of_order}: {e}");
        }
        for finer in ["1.5ms", "0.0001s", "0.0005"] {
            let e = parse_duration(finer).unwrap_err();
            assert!(e.contains("finer than a millisecond"), "{finer}: {e}");
        }
        for unit in ["500us", "5ns", "1w", "1.2.3s", "1s.", "."] {
            let e = parse_duration(unit).unwrap_err();
            assert!(e.contains("is not a duration"), "{unit}: {e}");
        }
        for huge in [
            "99999999999999999999d",
            "999999999999999999999999999999999999999999s",
        ] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains("is out of range"), "{huge}: {e}");
        }
    }

    proptest::proptest! {
        /// Every whole-millisecond duration reads back from the words quietus shows it in.
        #[test]
        fn every_duration_shown_reads_back(ms in 0u64..(400 * 86_400_000)) {
            let d = Duration::from_millis(ms);
            proptest::prop_assert_eq!(parse_duration(&exact_duration(d)), Ok(d));
        }

        /// Whatever the text, the parser answers (never panics); what it accepts is whole
        /// milliseconds, and its parts' units run from the largest down.
        #[test]
        fn any_text_is_answered(text in "[0-9.]{0,6}(d|h|m|s|ms|us|x)?([0-9.]{0,4}(d|h|m|s|ms))?") {
            if let Ok(d) = parse_duration(&text) {
                proptest::prop_assert_eq!(d.subsec_nanos() % 1_000_000, 0);
                let units: Vec<&str> = text
                    .split(|c: char| c.is_ascii_digit() || c == '.')
                    .filter(|u| !u.is_empty())
                    .collect();
                let rank = |u: &str| ["d", "h", "m", "s", "ms"].iter().position(|x| *x == u);
                let ranks: Vec<_> = units.iter().map(|u| rank(u)).collect();
                proptest::prop_assert!(ranks.iter().all(Option::is_some), "{text}");
                proptest::prop_assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{text}");
            }
        }
    }

    #[test]
    fn limits_read_like_durations() {
        assert_eq!(round_duration(Duration::from_secs(7 * 86400)), "7d");
        assert_eq!(round_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(round_duration(Duration::from_secs(90)), "90s");
        assert_eq!(round_duration(Duration::from_millis(10)), "10ms");
        assert_eq!(round_duration(Duration::ZERO), "0ms");
        assert_eq!(round_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn a_rejected_value_reads_as_it_was_written() {
        for written in ["7d1ms", "8d", "1h30m", "1s500ms", "0s", "25h"] {
            let parsed = parse_duration(written).unwrap();
            let shown = exact_duration(parsed);
            assert_eq!(parse_duration(&shown), Ok(parsed), "{written} -> {shown}");
        }
        assert_eq!(exact_duration(parse_duration("7d1ms").unwrap()), "7d1ms");
        assert_eq!(exact_duration(Duration::from_secs(90_000)), "1d1h");
        assert_eq!(exact_duration(Duration::from_nanos(1_001)), "1us1ns");
    }

    #[test]
    fn flags() {
        for yes in ["1", "true", "YES", "on", "y"] {
            assert_eq!(parse_flag(yes), Ok(true), "{yes}");
        }
        for no in ["0", "false", "No", "off", "n"] {
            assert_eq!(parse_flag(no), Ok(false), "{no}");
        }
        let err = parse_flag("maybe").unwrap_err();
        assert!(err.contains("maybe") && err.contains("1/0"), "{err}");
    }

    #[test]
    fn hard_timeout_accepts_none() {
        assert_eq!(parse_duration_or_none("none"), Ok(None));
        assert_eq!(
            parse_duration_or_none("2h"),
            Ok(Some(Duration::from_secs(7200)))
        );
        let err = parse_duration_or_none("soon").unwrap_err();
        assert!(err.contains("none"), "{err}");
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal("TERM"), Ok(Signal::TERM));
        assert_eq!(parse_signal("sigint"), Ok(Signal::INT));
        assert_eq!(parse_signal("1"), Ok(Signal::HUP));
        let err = parse_signal("NOPE").unwrap_err();
        assert!(err.contains("NOPE") && err.contains("TERM"), "{err}");
    }

    #[test]
    fn lists_split_like_path() {
        assert_eq!(
            split_list(std::ffi::OsStr::new("a:b::c/d:")),
            vec![
                OsString::from("a"),
                OsString::from("b"),
                OsString::from("c/d")
            ]
        );
        assert!(split_list(std::ffi::OsStr::new(":")).is_empty());
    }
}
