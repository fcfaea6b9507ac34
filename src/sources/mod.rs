//! Activity sources: each one only stamps the [`ActivityBoard`](crate::parts::ActivityBoard).

pub(crate) mod children;
pub(crate) mod files;
pub(crate) mod lines;
pub(crate) mod network;
pub(crate) mod output;
pub(crate) mod probes;
pub(crate) mod shared_watcher;
