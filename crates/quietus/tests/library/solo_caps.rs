//! Solo caps: a source that keeps a child alive on its own stops counting past its cap. A
//! silent child whose grandchild spins forever is ended; a silent build in grandchildren that
//! is shorter than the cap is not.

use crate::support as common;

use std::time::Duration;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{ActivitySource, MonitorConfig, Outcome, Session};

#[test]
fn a_spinning_grandchild_of_a_silent_child_is_ended_after_the_children_cap() {
    let m = Marker::new("cap-spin");
    let buf = SharedBuf::new();
    let config = MonitorConfig::builder()
        .idle_timeout(ms(1500))
        .watch_files(false)
        .solo_cap(ActivitySource::Children, Some(ms(2000)))
        .build()
        .unwrap();
    // The child says one line, then stays silent while its grandchild spins.
    let script = "yes > /dev/null & echo ready; wait";
    let session = Session::builder(m.sh(script))
        .config(config)
        .stdout(buf.sink())
        .spawn()
        .unwrap();
    buf.wait_for("ready");
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout, got {:?}", result.outcome);
    };
    assert_eq!(report.capped, vec![ActivitySource::Children], "{report}");
    assert!(report.to_string().contains("children capped"), "{report}");
    // The spinner kept it alive past the idle timeout, for the cap and no longer than needed.
    assert!(result.runtime >= ms(3500), "{:?}", result.runtime);
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&m);
}

#[test]
fn without_a_cap_the_spinning_grandchild_keeps_the_child_alive() {
    let m = Marker::new("cap-none");
    let buf = SharedBuf::new();
    let config = MonitorConfig::builder()
        .idle_timeout(ms(1500))
        .watch_files(false)
        .solo_cap(ActivitySource::Children, None)
        .build()
        .unwrap();
    let session = Session::builder(m.sh("yes > /dev/null & echo ready; wait"))
        .config(config)
        .stdout(buf.sink())
        .spawn()
        .unwrap();
    buf.wait_for("ready");
    // Several idle timeouts (and more than the other test's cap) later: still running.
    assert!(session.wait_timeout(Duration::from_secs(6)).is_none());
    session.terminate();
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::Terminated { .. }),
        "{:?}",
        result.outcome
    );
    assert_no_leak(&m);
}

/// About 1.5 s of compiler work on this machine, per compile.
fn heavy_c_source() -> String {
    let mut text = String::new();
    for n in 0..400 {
        text.push_str(&format!(
            "double f{n}(double x){{double s=0;for(int i=0;i<100;i++){{s+=x*i/(i+1.0)+{n};\
             if(s>1e9)s=s/3;}}return s;}}\n"
        ));
    }
    text.push_str("int main(void){return (int)f1(2.0);}\n");
    text
}

#[test]
fn a_real_silent_build_shorter_than_the_default_cap_is_never_ended() {
    let m = Marker::new("cap-build");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.c"), heavy_c_source()).unwrap();
    // Default caps (children: 30 minutes); an idle timeout far shorter than the build, so
    // only the compilers' CPU keeps the silent child alive.
    let config = MonitorConfig::builder()
        .idle_timeout(ms(2500))
        .watch_files(false)
        .build()
        .unwrap();
    assert_eq!(
        config.solo_caps().get(&ActivitySource::Children),
        Some(&quietus::MonitorConfig::DEFAULT_CHILDREN_SOLO_CAP)
    );
    let buf = SharedBuf::new();
    let script = "for i in 1 2 3 4 5 6; do cc -O2 -c work.c -o work$i.o || exit 9; done; \
                  echo built";
    let mut command = m.sh(script);
    command.current_dir(dir.path());
    let session = Session::builder(command)
        .config(config)
        .stdout(buf.sink())
        .spawn()
        .unwrap();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:?}");
    assert_eq!(result.exit_code(), 0);
    assert!(buf.contains("built"));
    // The build outlasted the idle timeout: the children source, uncapped, kept it alive.
    assert!(result.runtime > ms(2500), "{:?}", result.runtime);
    assert_no_leak(&m);
}

#[test]
fn repeated_output_is_a_source_of_its_own_with_a_cap() {
    let m = Marker::new("cap-repeat");
    let buf = SharedBuf::new();
    let config = MonitorConfig::builder()
        .idle_timeout(ms(1500))
        .watch_files(false)
        .watch_children(false)
        .repeated_output(Some(ms(1500)))
        .build()
        .unwrap();
    // New output first, then the same retry line over and over (the counter changes).
    let script = "echo starting; i=0; while :; do i=$((i+1)); echo \"retrying in 5s (attempt $i)\"; \
                  sleep 0.2; done";
    let session = Session::builder(m.sh(script))
        .config(config)
        .stdout(buf.sink())
        .spawn()
        .unwrap();
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout, got {:?}", result.outcome);
    };
    assert_eq!(
        report.capped,
        vec![ActivitySource::RepeatedOutput],
        "{report}"
    );
    assert!(report.get(ActivitySource::RepeatedOutput).unwrap().events > 3);
    assert!(buf.contains("attempt 5"), "{}", buf.text());
    assert!(result.runtime >= ms(3000), "{:?}", result.runtime);
    assert_no_leak(&m);
}
