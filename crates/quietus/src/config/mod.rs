//! Configuration, a file for each thing configured: the monitor's own settings ([`MonitorConfig`],
//! with its [`KillLadder`] and [`Containment`]), the output kept ([`CaptureConfig`],
//! [`LogRetention`]), the event stream ([`EventConfig`]), the descendants' CPU
//! ([`ChildWatchConfig`]) and the watched folders ([`FileWatchConfig`]); with them, from its
//! own room, how completion is recognised ([`CompletionConfig`]).
//!
//! Each validated type is made by its builder, whose `build` checks every value and names the
//! setting it refuses ([`ConfigError::setting`]): a configuration that is held is a valid one.
//! The builders' setters take the plain names and say their default; the built types read the
//! values back by the same names, as grep-searcher's `SearcherBuilder` and `Searcher` do.
//!
//! ```
//! use std::time::Duration;
//! use quietus::{FileWatchConfig, MonitorConfig};
//!
//! let config = MonitorConfig::builder()
//!     .idle_timeout(Duration::from_secs(120))
//!     .files(FileWatchConfig::builder().root("notes"))
//!     .build()?;
//! assert_eq!(config.idle_timeout(), Duration::from_secs(120));
//! assert_eq!(config.files().roots().len(), 2); // .agent and notes
//! # Ok::<(), quietus::ConfigError>(())
//! ```

use std::time::Duration;

use crate::error::{ConfigError, Setting};

mod capture;
mod children;
mod events;
mod files;
mod ladder;
mod monitor;
#[cfg(test)]
mod tests;

pub use crate::completion::{CompletionConfig, CompletionConfigBuilder};
pub use capture::{CaptureConfig, CaptureConfigBuilder, LogRetention};
pub use children::{ChildWatchConfig, ChildWatchConfigBuilder};
pub use events::{EventConfig, EventConfigBuilder};
pub use files::{FileWatchConfig, FileWatchConfigBuilder};
pub use ladder::{Containment, KillLadder};
pub use monitor::{MonitorConfig, MonitorConfigBuilder};

pub(crate) use files::FileGlobs;
pub(crate) use ladder::KillStep;
pub(crate) use monitor::validate_idle_timeout;

/// Refuses a size outside `min..=max`, naming its setting.
fn check_size(setting: Setting, value: usize, min: usize, max: usize) -> Result<(), ConfigError> {
    if value < min || value > max {
        Err(ConfigError::SizeOutOfRange {
            setting,
            value,
            min,
            max,
        })
    } else {
        Ok(())
    }
}

/// Refuses a duration outside `min..=max`, naming its setting.
fn check_range(
    setting: Setting,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        Err(ConfigError::OutOfRange {
            setting,
            value,
            min,
            max,
        })
    } else {
        Ok(())
    }
}
