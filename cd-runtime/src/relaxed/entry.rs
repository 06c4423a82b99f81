//! `cd::relaxed`, the entry point: a relaxed CD, or the strict CD its configuration makes it
//! (`kind = "strict"`). It sits above `strict.rs`, which itself runs `run.rs` for
//! `kind = "relaxed"`, so that the two kinds do not import each other.

use crate::cd::Cd;
use crate::config::CdKindSetting;
use crate::error::CdError;
use crate::relaxed::run;
use crate::runtime;
use crate::strict;

/// Runs `body` as a relaxed child CD of the current CD (a strict CD, its LCSA, or another
/// relaxed CD). Begin and completion involve no communication; a failure is recovered on this
/// rank alone by replaying the CD's log, or escalated to the parent as an error.
///
/// A rank loss is detected at the CD's end, so with `log_medium = "buddy"` the log is
/// replicated when the body ends (acks in, before detection): the logs of this CD and of the
/// CDs around it go to the buddy rank in one internal rpc. After a loss the rank fetches them
/// back, restores the preserved state and replays as for a soft error, alone. With
/// `log_medium = "local"`, a replica lost with the buddy, or preserved state kept in the lost
/// memory, the CD escalates.
///
/// With `kind = "strict"` in the CD's configuration it runs as a strict CD spanning the
/// parent's ranks instead (the rule is in [`crate::config`]). The attribute of the same name,
/// `#[cd::relaxed(..)]`, runs a function's body through this function.
pub fn relaxed<R>(name: &str, body: impl FnMut(&Cd) -> Result<R, CdError>) -> Result<R, CdError> {
    let rt = runtime::handle();
    let parent = rt.top();
    let settings = rt.settings(name, parent.level + 1);
    if settings.kind == Some(CdKindSetting::Strict) {
        // The configuration makes this CD strict: same ranks as the parent.
        return strict::strict_as_configured(name, body);
    }
    run::run(rt, parent, settings, name, body)
}
