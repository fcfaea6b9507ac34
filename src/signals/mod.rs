//! Activity sources: each one only stamps the [`ActivityBoard`](crate::ActivityBoard).

pub(crate) mod output;
pub(crate) mod files;
