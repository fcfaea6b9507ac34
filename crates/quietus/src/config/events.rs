//! How the event stream behaves: [`EventConfig`].

use std::time::Duration;

use super::{check_range, check_size};
use crate::error::{ConfigError, Setting};

/// How the event stream ([`Session::events`](crate::Session::events)) behaves. Made by
/// [`EventConfig::builder`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventConfig {
    pub(crate) throttle: Duration,
    pub(crate) chunk_cap: usize,
    pub(crate) utf8_boundaries: bool,
    pub(crate) idle_warning: Option<f64>,
    pub(crate) capacity: usize,
}

impl Default for EventConfig {
    fn default() -> Self {
        Self {
            throttle: Duration::from_millis(150),
            chunk_cap: 4096,
            utf8_boundaries: false,
            idle_warning: Some(0.8),
            capacity: 1024,
        }
    }
}

impl EventConfig {
    /// A builder, from the defaults.
    pub fn builder() -> EventConfigBuilder {
        EventConfigBuilder::default()
    }

    /// The throttle interval ([`EventConfigBuilder::throttle`]).
    pub fn throttle(&self) -> Duration {
        self.throttle
    }

    /// Bytes at most in one `Output` event ([`EventConfigBuilder::chunk_cap`]).
    pub fn chunk_cap(&self) -> usize {
        self.chunk_cap
    }

    /// Whether `Output` events are cut on UTF-8 boundaries only
    /// ([`EventConfigBuilder::utf8_boundaries`]).
    pub fn utf8_boundaries(&self) -> bool {
        self.utf8_boundaries
    }

    /// The idle-warning fraction, if any ([`EventConfigBuilder::idle_warning`]).
    pub fn idle_warning(&self) -> Option<f64> {
        self.idle_warning
    }

    /// The channel capacity, in events ([`EventConfigBuilder::capacity`]).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Checks every value against its range.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        check_size(Setting::EventsChunkCap, self.chunk_cap, 1, 1 << 20)?;
        check_size(Setting::EventsCapacity, self.capacity, 32, 1 << 20)?;
        check_range(
            Setting::EventsThrottle,
            self.throttle,
            Duration::ZERO,
            Duration::from_secs(3600),
        )?;
        if let Some(f) = self.idle_warning
            && !(f > 0.0 && f < 1.0)
        {
            return Err(ConfigError::InvalidFraction {
                setting: Setting::EventsIdleWarning,
                value: f,
            });
        }
        Ok(())
    }
}

/// Builds an [`EventConfig`]; each setter says its default and range.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[must_use]
pub struct EventConfigBuilder(pub(super) EventConfig);

impl From<EventConfig> for EventConfigBuilder {
    fn from(config: EventConfig) -> Self {
        Self(config)
    }
}

impl EventConfigBuilder {
    /// At most one `Output` event per stream, and one `Activity` event per source, per this
    /// interval (at most an hour). Default 150 ms.
    pub fn throttle(mut self, interval: Duration) -> Self {
        self.0.throttle = interval;
        self
    }

    /// Bytes at most in one `Output` event (1 B to 1 MiB). Default 4 KiB.
    pub fn chunk_cap(mut self, bytes: usize) -> Self {
        self.0.chunk_cap = bytes;
        self
    }

    /// Cut `Output` events only on UTF-8 character boundaries. Default off.
    pub fn utf8_boundaries(mut self, on: bool) -> Self {
        self.0.utf8_boundaries = on;
        self
    }

    /// Send `IdleWarning` once this fraction (strictly between 0 and 1) of the idle timeout
    /// has passed in silence (`None`: never). Default 0.8.
    pub fn idle_warning(mut self, fraction: Option<f64>) -> Self {
        self.0.idle_warning = fraction;
        self
    }

    /// The channel's capacity, in events (32 to 1 Mi). Default 1024.
    pub fn capacity(mut self, events: usize) -> Self {
        self.0.capacity = events;
        self
    }

    /// The configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first setting out of its range.
    pub fn build(self) -> Result<EventConfig, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}
