//! Keys the configuration no longer takes: each is refused with why it went and what to use
//! instead, rather than as an unknown key, so a file written for an earlier release says
//! what to change.

use crate::error::ConfigError;

/// The removed keys: (key, why it was removed and what to do).
const REMOVED: &[(&str, &str)] = &[(
    "restart_threads",
    "`restart_threads` was removed: a re-execution's kernels on a thread pool were measured \
     slower than the serial re-execution (hpgmg-bench parallel_restart; see ROADMAP.md, \
     relaxed CDs). Delete the key: a re-execution runs on the rank's own thread, and a program \
     that wants threads in its kernels starts its own pool (hpgmg's `--threads`)",
)];

/// The message of `e` for a removed key (the parser's "unknown field" names it); `e` as it
/// is otherwise. The place (file, line, key) is kept.
pub(super) fn explain(mut e: ConfigError) -> ConfigError {
    let Some(key) = e.key.as_deref() else {
        return e;
    };
    let last = key.rsplit('.').next().unwrap_or(key);
    if let Some((_, why)) = REMOVED.iter().find(|(k, _)| *k == last) {
        if e.message.starts_with("unknown field") {
            e.message = (*why).to_string();
        }
    }
    e
}
