use std::time::Duration;

use super::*;
use crate::activity::ActivitySource;
use crate::error::Setting;
use crate::signal::Signal;

fn refused(builder: MonitorConfigBuilder) -> ConfigError {
    builder.build().unwrap_err()
}

#[test]
fn default_is_valid_and_documented_values() {
    let c = MonitorConfig::builder().build().unwrap();
    assert_eq!(c, MonitorConfig::default());
    assert_eq!(c.idle_timeout(), Duration::from_secs(300));
    assert_eq!(c.effective_check_interval(), Duration::from_secs(30));
    assert_eq!(
        c.kill_ladder().effective(),
        vec![
            KillStep {
                signal: Signal::TERM,
                grace: Duration::from_secs(5)
            },
            KillStep {
                signal: Signal::KILL,
                grace: Duration::ZERO
            }
        ]
    );
}

#[test]
fn a_built_configuration_reads_back_what_was_set() {
    let c = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(7))
        .hard_timeout(Some(Duration::from_secs(70)))
        .files(
            FileWatchConfig::builder()
                .root("notes")
                .own_file("report.json"),
        )
        .capture(
            CaptureConfig::builder()
                .spill(false)
                .retention(LogRetention::keep_all()),
        )
        .events(EventConfig::builder().capacity(64))
        .build()
        .unwrap();
    assert_eq!(c.idle_timeout(), Duration::from_secs(7));
    assert_eq!(c.hard_timeout(), Some(Duration::from_secs(70)));
    assert_eq!(c.files().roots().len(), 2);
    assert_eq!(c.files().own_files().len(), 1);
    assert!(!c.capture().spill());
    assert_eq!(c.capture().retention().max_age(), None);
    assert_eq!(c.events().capacity(), 64);
    let again = MonitorConfigBuilder::from(c.clone()).build().unwrap();
    assert_eq!(again, c, "a configuration goes back to its builder whole");
}

#[test]
fn tuning_a_source_does_not_turn_it_on() {
    let off = MonitorConfig::builder()
        .watch_files(false)
        .watch_children(false)
        .files(FileWatchConfig::builder().root("work"))
        .children(ChildWatchConfig::builder().cpu_threshold(0.5))
        .build()
        .unwrap();
    assert!(!off.watches(&ActivitySource::Files));
    assert!(!off.watches(&ActivitySource::Children));
    let on = MonitorConfig::builder()
        .children(ChildWatchConfig::builder())
        .build()
        .unwrap();
    assert!(on.watches(&ActivitySource::Children), "on by default");
}

#[test]
fn check_interval_is_clamped() {
    let short = MonitorConfig::builder()
        .idle_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    assert_eq!(short.effective_check_interval(), Duration::from_millis(100));
    let long = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    assert_eq!(long.effective_check_interval(), Duration::from_secs(30));
}

#[test]
fn zero_idle_timeout_names_the_field_and_range() {
    let text = refused(MonitorConfig::builder().idle_timeout(Duration::ZERO)).to_string();
    assert!(text.contains("idle_timeout"), "{text}");
    assert!(text.contains("1ms") && text.contains("604800s"), "{text}");
}

#[test]
fn input_wait_timeout_is_validated() {
    for bad in [
        Duration::from_millis(10),
        Duration::from_secs(2 * 24 * 3600),
    ] {
        let err = refused(MonitorConfig::builder().input_wait_timeout(Some(bad)));
        assert!(
            matches!(
                err,
                ConfigError::OutOfRange {
                    setting: Setting::InputWaitTimeout,
                    ..
                }
            ),
            "{err:?}"
        );
    }
    let ok = MonitorConfig::builder().input_wait_timeout(Some(Duration::from_secs(10)));
    assert!(ok.build().is_ok());
    assert_eq!(MonitorConfig::default().input_wait_timeout(), None);
}

#[test]
fn every_error_names_its_setting_as_a_type() {
    let cases = [
        (
            MonitorConfig::builder().input_wait_notice(Some(Duration::from_millis(1))),
            Setting::InputWaitNotice,
        ),
        (
            MonitorConfig::builder()
                .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(7200))),
            Setting::KillLadderGrace,
        ),
        (
            MonitorConfig::builder().kill_ladder(KillLadder::new([])),
            Setting::KillLadder,
        ),
        (
            MonitorConfig::builder().events(EventConfig::builder().capacity(1)),
            Setting::EventsCapacity,
        ),
        (
            MonitorConfig::builder().events(EventConfig::builder().idle_warning(Some(2.0))),
            Setting::EventsIdleWarning,
        ),
        (
            MonitorConfig::builder().children(ChildWatchConfig::builder().cpu_threshold(0.0)),
            Setting::ChildrenCpuThreshold,
        ),
        (
            MonitorConfig::builder().files(FileWatchConfig::builder().include("a[")),
            Setting::FilesInclude,
        ),
    ];
    for (builder, setting) in cases {
        let err = refused(builder);
        assert_eq!(err.setting(), Some(setting), "{err}");
        assert!(err.to_string().contains(setting.path()), "{err}");
    }
}

#[test]
fn each_part_refuses_its_own_invalid_values_where_it_is_built() {
    let events = EventConfig::builder().chunk_cap(0).build().unwrap_err();
    assert_eq!(events.setting(), Some(Setting::EventsChunkCap));
    let children = ChildWatchConfig::builder().cpu_threshold(65.0).build();
    assert_eq!(
        children.unwrap_err().setting(),
        Some(Setting::ChildrenCpuThreshold)
    );
    let files = FileWatchConfig::builder().arm_delay(Duration::from_secs(11));
    assert_eq!(
        files.build().unwrap_err().setting(),
        Some(Setting::FilesArmDelay)
    );
    let capture = CaptureConfig::builder().cap_per_stream(2 << 30).build();
    assert_eq!(
        capture.unwrap_err().setting(),
        Some(Setting::CaptureCapPerStream)
    );
}

#[test]
fn the_file_source_s_settings_are_checked_only_while_it_is_on() {
    let bad = FileWatchConfig::builder().exclude("a[");
    let off = MonitorConfig::builder()
        .watch_files(false)
        .files(bad.clone());
    assert!(off.build().is_ok());
    let on = MonitorConfig::builder().files(bad);
    assert_eq!(refused(on).setting(), Some(Setting::FilesExclude));
}

#[test]
fn absurd_hard_timeout_is_rejected() {
    let err = refused(
        MonitorConfig::builder().hard_timeout(Some(Duration::from_secs(10 * 365 * 24 * 3600))),
    );
    assert!(matches!(
        err,
        ConfigError::OutOfRange {
            setting: Setting::HardTimeout,
            ..
        }
    ));
}

#[test]
fn ladder_errors() {
    let empty = MonitorConfig::builder().kill_ladder(KillLadder::new([]));
    assert_eq!(empty.build(), Err(ConfigError::EmptyLadder));
    let early_kill = MonitorConfig::builder().kill_ladder(KillLadder::new([
        (Signal::KILL, Duration::ZERO),
        (Signal::TERM, Duration::from_secs(1)),
    ]));
    assert_eq!(
        early_kill.build(),
        Err(ConfigError::KillBeforeEnd { step: 0 })
    );
    let long_grace = MonitorConfig::builder()
        .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(7200)));
    assert!(long_grace.build().is_err());
    let explicit_kill = MonitorConfig::builder()
        .kill_ladder(KillLadder::new([
            (Signal::INT, Duration::from_secs(1)),
            (Signal::KILL, Duration::from_secs(1)),
        ]))
        .build()
        .unwrap();
    assert_eq!(explicit_kill.kill_ladder().effective().len(), 2);
    assert_eq!(KillLadder::immediate().effective().len(), 1);
}

#[test]
fn bad_glob_names_field_and_pattern() {
    let config = FileWatchConfig {
        exclude: vec!["a[".into()],
        ..FileWatchConfig::default()
    };
    let err = config.globs().unwrap_err().to_string();
    assert!(err.contains("files.exclude") && err.contains("a["), "{err}");
}

#[test]
fn signal_parsing() {
    assert_eq!("TERM".parse::<Signal>().unwrap(), Signal::TERM);
    assert_eq!("sigint".parse::<Signal>().unwrap(), Signal::INT);
    assert_eq!("9".parse::<Signal>().unwrap(), Signal::KILL);
    assert_eq!(Signal::HUP.to_string(), "HUP");
    assert!("0".parse::<Signal>().is_err());
    assert!("64".parse::<Signal>().is_err());
    let err = "NOPE".parse::<Signal>().unwrap_err();
    assert!(err.to_string().contains("NOPE"));
}
