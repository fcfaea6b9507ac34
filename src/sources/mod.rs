//! Activity sources: each one only stamps the [`ActivityBoard`](crate::ActivityBoard).

pub(crate) mod children;
pub(crate) mod files;
pub(crate) mod output;
