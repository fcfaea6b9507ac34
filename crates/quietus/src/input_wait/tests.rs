//! The input-wait rule on a mock clock with a fake process table.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use super::*;
use crate::clock::MockClock;
use crate::diagnosis::ProcessDiagnosis;

/// A fake process table: each pid's kind and read count.
struct Table(RefCell<HashMap<u32, (StallKind, Option<u64>)>>);

impl Table {
    fn new(rows: &[(u32, StallKind, Option<u64>)]) -> Self {
        Self(RefCell::new(
            rows.iter().map(|(p, k, n)| (*p, (*k, *n))).collect(),
        ))
    }

    fn set(&self, pid: u32, kind: StallKind, reads: Option<u64>) {
        self.0.borrow_mut().insert(pid, (kind, reads));
    }

    fn look(&self) -> Look {
        let table = self.0.borrow();
        let mut pids: Vec<u32> = table.keys().copied().collect();
        pids.sort();
        let processes: Vec<ProcessDiagnosis> = pids
            .iter()
            .map(|pid| ProcessDiagnosis {
                pid: Pid::new(*pid).expect("a pid"),
                name: format!("p{pid}"),
                state: "sleeping",
                wchan: None,
                syscall: Some("read".to_owned()),
                fd: Some(0),
                target: Some("stdin (a pipe)".to_owned()),
                kind: table[pid].0,
                waits_on: None,
                error: None,
            })
            .collect();
        let kind = if processes.iter().any(|p| p.kind == StallKind::AwaitingInput) {
            StallKind::AwaitingInput
        } else {
            StallKind::Sleeping
        };
        let diagnosis = Diagnosis {
            kind,
            summary: String::new(),
            processes,
        };
        Look::from(&diagnosis, &|pid| table.get(&pid.get()).and_then(|r| r.1))
    }
}

const D: Duration = Duration::from_secs(2);

/// Looks whenever the rule asks until `until`; returns when it fired (and with what).
fn run(
    rule: &mut InputWaitRule,
    clock: &MockClock,
    last: Instant,
    table: &Table,
    until: Instant,
) -> Vec<(Instant, InputWait)> {
    let mut fired = Vec::new();
    loop {
        let at = rule.next_look(last);
        if at > until {
            return fired;
        }
        clock.advance(at.saturating_duration_since(clock.now()));
        match rule.observe(clock.now(), last, table.look()) {
            Some(Found::Notice(wait)) => fired.push((clock.now(), wait)),
            Some(Found::End(wait)) => {
                fired.push((clock.now(), wait));
                return fired; // the child is being ended: no more looks
            }
            None => {}
        }
    }
}

#[test]
fn a_held_read_fires_within_a_second_and_a_half_of_the_timeout() {
    let clock = MockClock::new();
    let last = clock.now();
    let table = Table::new(&[(10, StallKind::AwaitingInput, Some(3))]);
    let mut rule = InputWaitRule::new(None, Some(D)).unwrap();
    assert_eq!(rule.next_look(last), last + Duration::from_secs(1));
    let fired = run(
        &mut rule,
        &clock,
        last,
        &table,
        last + Duration::from_secs(60),
    );
    assert_eq!(fired.len(), 1, "once per episode: {fired:?}");
    let (at, wait) = &fired[0];
    let after = at.saturating_duration_since(last);
    assert!(
        after >= D && after <= D + Duration::from_millis(1500),
        "{after:?}"
    );
    assert_eq!((wait.pid.get(), wait.name.as_str()), (10, "p10"));
    assert_eq!(wait.target, "stdin (a pipe)");
    assert!(wait.waited >= D);
}

#[test]
fn a_fed_reader_never_fires() {
    let clock = MockClock::new();
    let last = clock.now();
    let table = Table::new(&[(10, StallKind::AwaitingInput, Some(0))]);
    let mut rule = InputWaitRule::new(None, Some(D)).unwrap();
    let mut reads = 0;
    let mut fed_at = last;
    for _ in 0..400 {
        let at = rule.next_look(last);
        clock.advance(at.saturating_duration_since(clock.now()));
        // A line every 300 ms: its read count moves, though every look finds it in `read`.
        while clock.now() >= fed_at + Duration::from_millis(300) {
            fed_at += Duration::from_millis(300);
            reads += 1;
        }
        table.set(10, StallKind::AwaitingInput, Some(reads));
        assert_eq!(rule.observe(clock.now(), last, table.look()), None);
    }
    assert!(clock.now() >= last + Duration::from_secs(30));
}

#[test]
fn activity_starts_the_episode_again() {
    let clock = MockClock::new();
    let table = Table::new(&[(10, StallKind::AwaitingInput, Some(1))]);
    let mut rule = InputWaitRule::new(None, Some(D)).unwrap();
    let first = clock.now();
    let stop = first + Duration::from_millis(2500);
    assert!(
        run(
            &mut rule,
            &clock,
            first,
            &table,
            stop - Duration::from_millis(600)
        )
        .is_empty()
    );
    // A source shows activity: the wait seen so far no longer counts.
    let later = clock.now();
    assert!(rule.next_look(later) >= later + Duration::from_secs(1));
    let fired = run(
        &mut rule,
        &clock,
        later,
        &table,
        later + Duration::from_secs(10),
    );
    assert_eq!(fired.len(), 1);
    assert!(fired[0].0 >= later + D);
}

#[test]
fn a_busy_process_or_no_reader_means_no_input_wait() {
    let clock = MockClock::new();
    let last = clock.now();
    let table = Table::new(&[
        (10, StallKind::AwaitingInput, Some(1)),
        (11, StallKind::Running, Some(1)),
    ]);
    let mut rule = InputWaitRule::new(None, Some(D)).unwrap();
    assert!(
        run(
            &mut rule,
            &clock,
            last,
            &table,
            last + Duration::from_secs(30)
        )
        .is_empty()
    );
    table.set(11, StallKind::Sleeping, Some(1));
    table.set(10, StallKind::Sleeping, Some(1));
    let until = clock.now() + Duration::from_secs(30);
    assert!(run(&mut rule, &clock, last, &table, until).is_empty());
}

#[test]
fn an_unreadable_read_count_proves_nothing() {
    let clock = MockClock::new();
    let last = clock.now();
    let table = Table::new(&[(10, StallKind::AwaitingInput, None)]);
    let mut rule = InputWaitRule::new(None, Some(D)).unwrap();
    assert!(
        run(
            &mut rule,
            &clock,
            last,
            &table,
            last + Duration::from_secs(30)
        )
        .is_empty()
    );
}

#[test]
fn a_new_episode_after_input_fires_again() {
    let clock = MockClock::new();
    let last = clock.now();
    let table = Table::new(&[(10, StallKind::AwaitingInput, Some(1))]);
    let mut rule = InputWaitRule::new(None, Some(D)).unwrap();
    let fired = run(
        &mut rule,
        &clock,
        last,
        &table,
        last + Duration::from_secs(10),
    );
    assert_eq!(fired.len(), 1);
    // It got a line (read count moved) and waits again: a second episode, a second event.
    table.set(10, StallKind::AwaitingInput, Some(2));
    let until = clock.now() + Duration::from_secs(10);
    let again = run(&mut rule, &clock, last, &table, until);
    assert_eq!(again.len(), 1, "{again:?}");
}

#[test]
fn looks_are_frequent_whatever_the_timeout() {
    let rule = InputWaitRule::new(None, Some(Duration::from_secs(600))).unwrap();
    let clock = MockClock::new();
    let last = clock.now();
    assert_eq!(rule.next_look(last), last + Duration::from_secs(1));
    let short = InputWaitRule::new(None, Some(Duration::from_millis(100))).unwrap();
    assert_eq!(short.next_look(last), last + Duration::from_millis(50));
}

#[test]
fn a_notice_is_told_once_per_episode_and_ends_nothing() {
    let clock = MockClock::new();
    let last = clock.now();
    let table = Table::new(&[(10, StallKind::AwaitingInput, Some(3))]);
    let notice = Duration::from_millis(800);
    let mut rule = InputWaitRule::new(Some(notice), None).unwrap();
    // Paced by the notice: the first look after min(notice / 2, 1 s) of quiet.
    assert_eq!(rule.next_look(last), last + notice / 2);
    let fired = run(
        &mut rule,
        &clock,
        last,
        &table,
        last + Duration::from_secs(60),
    );
    assert_eq!(
        fired.len(),
        1,
        "once per episode, and never an end: {fired:?}"
    );
    assert!(fired[0].1.waited >= notice);
    // New input ends the episode; the next wait is told again.
    table.set(10, StallKind::AwaitingInput, Some(4));
    let fired = run(
        &mut rule,
        &clock,
        last,
        &table,
        clock.now() + Duration::from_secs(60),
    );
    assert_eq!(fired.len(), 1, "a new episode: {fired:?}");
}

#[test]
fn a_notice_before_the_timeout_then_the_end() {
    let clock = MockClock::new();
    let last = clock.now();
    let table = Table::new(&[(10, StallKind::AwaitingInput, Some(3))]);
    let mut rule =
        InputWaitRule::new(Some(Duration::from_secs(1)), Some(Duration::from_secs(4))).unwrap();
    let mut found = Vec::new();
    loop {
        let at = rule.next_look(last);
        clock.advance(at.saturating_duration_since(clock.now()));
        match rule.observe(clock.now(), last, table.look()) {
            Some(f @ Found::Notice(_)) => found.push(f),
            Some(f @ Found::End(_)) => {
                found.push(f);
                break;
            }
            None => {}
        }
        assert!(
            clock.now() < last + Duration::from_secs(60),
            "no end: {found:?}"
        );
    }
    assert!(
        matches!(found[..], [Found::Notice(_), Found::End(_)]),
        "{found:?}"
    );
    assert!(rule.noticed(), "the end does not tell again");
    assert_eq!(
        InputWaitRule::new(None, None).map(|_| ()),
        None,
        "both off: no rule"
    );
}

/// Observe mode goes on looking after an end (issue 51, point 4: one input wait was recorded
/// five times): the same episode is found once; a new one (its reads moved) again.
#[test]
fn an_episode_ends_once_however_long_the_tree_goes_on_waiting() {
    let clock = MockClock::new();
    let last = clock.now();
    let table = Table::new(&[(10, StallKind::AwaitingInput, Some(1))]);
    let mut rule = InputWaitRule::new(None, Some(D)).unwrap();
    let mut ends = 0;
    let until = last + Duration::from_secs(30);
    while rule.next_look(last) <= until {
        let at = rule.next_look(last);
        clock.advance(at.saturating_duration_since(clock.now()));
        if let Some(Found::End(_)) = rule.observe(clock.now(), last, table.look()) {
            ends += 1;
        }
    }
    assert_eq!(ends, 1, "one end per episode");
    table.set(10, StallKind::AwaitingInput, Some(2));
    let later = clock.now() + Duration::from_secs(30);
    while rule.next_look(last) <= later {
        let at = rule.next_look(last);
        clock.advance(at.saturating_duration_since(clock.now()));
        if let Some(Found::End(_)) = rule.observe(clock.now(), last, table.look()) {
            ends += 1;
        }
    }
    assert_eq!(ends, 2, "a new episode ends again, once");
}
