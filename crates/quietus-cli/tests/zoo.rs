//! The stall zoo's fast subset (`zoo/`, fixtures marked `zoo-fast`) under this build's
//! `quietus`, with assertions on quietus alone: no working fixture ended, every stall ended
//! with the right diagnosis, every lingering run over promptly, nothing left behind. The whole
//! zoo, with the peers' policies beside it, is the benchmark (`python3 zoo/run.py`,
//! docs/benchmarks.md); it measures, this gates.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[test]
fn the_fast_subset_of_the_stall_zoo_is_scored_perfectly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = tempfile::tempdir().expect("a temporary directory");
    let json = out.path().join("zoo.json");
    let status = Command::new("python3")
        .arg(root.join("zoo/run.py"))
        .args([
            "--fast", "--policy", "quietus", "--repeat", "1", "-q", "-j", "2", "--binary",
        ])
        .arg(env!("CARGO_BIN_EXE_quietus"))
        .arg("--json")
        .arg(&json)
        .current_dir(&root)
        .status()
        .expect("python3 runs the zoo");
    assert!(status.success(), "the zoo's runner failed: {status}");
    let results: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let runs = results["runs"].as_array().expect("runs");
    assert!(runs.len() >= 6, "the fast subset ran: {}", runs.len());
    let mut wrong = Vec::new();
    for run in runs {
        let name = run["fixture"].as_str().unwrap_or("?");
        let outcome = run["outcome"].as_str().unwrap_or("?");
        let ok = match run["truth"].as_str() {
            Some("working") => outcome == "ok",
            Some("stalled" | "lingering") => outcome == "caught",
            other => panic!("{name}: unknown truth {other:?}"),
        };
        if !ok {
            wrong.push(format!("{name}: {outcome}"));
        }
        if let Some(expected) = run["expected_kind"].as_str() {
            let said = run["diagnosis"].as_str().unwrap_or("none");
            if said != expected {
                wrong.push(format!(
                    "{name}: diagnosed {said}, expected {expected} ({})",
                    run["diagnosis_summary"]
                ));
            }
        }
        if run["leftovers"].as_u64() != Some(0) {
            wrong.push(format!("{name}: left {} behind", run["leftovers"]));
        }
        if !run["runner_error"].is_null() {
            wrong.push(format!("{name}: runner error {}", run["runner_error"]));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
