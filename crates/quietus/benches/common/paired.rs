//! Paired ABBA rounds shared by the benches that compare a server against the library: both
//! sides run back to back in each round (their order alternating), so a machine whose speed
//! varies from minute to minute moves both alike; the figure is the median of the per-round
//! ratios.

use std::time::Duration;

/// Runs `rounds` ABBA rounds of `a` and `b` (each returns the time it measured) and prints
/// `<name>: median <ratio>x (<a_name> <median>, <b_name> <median>, medians of N rounds)`.
pub fn report_paired(
    name: &str,
    (a_name, mut a): (&str, impl FnMut() -> Duration),
    (b_name, mut b): (&str, impl FnMut() -> Duration),
    rounds: usize,
) {
    let mut ratios = Vec::with_capacity(rounds);
    let mut a_times = Vec::with_capacity(rounds);
    let mut b_times = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let (ta, tb) = if round % 2 == 0 {
            let ta = a();
            (ta, b())
        } else {
            let tb = b();
            (a(), tb)
        };
        ratios.push(ta.as_secs_f64() / tb.as_secs_f64());
        a_times.push(ta);
        b_times.push(tb);
    }
    ratios.sort_by(f64::total_cmp);
    a_times.sort();
    b_times.sort();
    eprintln!(
        "{name}: median {:.2}x ({a_name} {:?}, {b_name} {:?}, medians of {rounds} rounds)",
        ratios[rounds / 2],
        a_times[rounds / 2],
        b_times[rounds / 2],
    );
}
