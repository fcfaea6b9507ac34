//! Errors in the command's messages, the way people read them (durations are the library's
//! [`quietus::outcome::HumanDuration`]).

/// An error and each of its causes, once each, joined by `: ` (the library's errors say what
/// could not be done, and leave the cause to `source()`).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}
