//! Activity sources: each one only stamps the [`ActivityBoard`](crate::parts::ActivityBoard).

pub(crate) mod children;
pub(crate) mod files;
pub(crate) mod network;
pub(crate) mod output;
