//! Incoming rpc requests in a relaxed recovery. A request is a write counted at the target
//! (docs/relaxed-cds.md, "Forward execution: logging": an rpc request is a write counted at the target), so the replay runs its
//! function again at the request's (EC, IWC) place among the incoming writes, from the
//! arguments the initiator logged, and compares the result with the reply the initiator logged.
//!
//! What a replayed function may do: change this rank's memory and state that the recovery
//! rolled back before the request's place (combining effects included, as for atomics). What
//! it may not do: communicate (or allocate, or draw from `cd::rng()`). Its first execution's
//! operations are in this rank's log where progress happened to run it, between the body's
//! operations; the replay runs it at the start of its epoch instead, so the log cannot serve
//! them in LSN order. A recovery whose log holds operations started by a replayed request's
//! function refuses before replaying ([`check`]); a function that starts one while replayed
//! (it did not the first time: not deterministic) is refused as it does ([`refuse_operation`]).

use pgas::runtime_hooks as resilience;

use crate::relaxed::PreservedRegion;
use crate::relaxed::log_store::LogEntry;
use crate::relaxed::state::incoming::{Incoming, IncomingWhat};
use crate::relaxed::state::rerunning::Rerunning;
use crate::runtime::CdRuntime;

/// Runs the function of the incoming request `w` (`name`, `args`) again; its result must be
/// the `reply` the initiator logged, when it logged one (not for `rpc_ff`).
pub(crate) fn rerun(
    rt: &CdRuntime,
    w: &Incoming,
    name: &str,
    args: &[u8],
    reply: Option<&[u8]>,
) -> Result<(), String> {
    let previous = rt.relaxed.rerunning.replace(Some(Rerunning {
        from: w.from,
        iwc: w.iwc,
        name: name.to_string(),
    }));
    let result = resilience::rerun_rpc(name, args);
    *rt.relaxed.rerunning.borrow_mut() = previous;
    let got = result.map_err(|e| {
        format!(
            "the rpc request `{name}` from rank {} (IWC {}) cannot be replayed: {e}",
            w.from, w.iwc
        )
    })?;
    match reply {
        Some(logged) if logged != got => Err(format!(
            "the replayed rpc `{name}` from rank {} (IWC {}) returned other bytes than the reply \
             that rank logged: the function is not deterministic, or it read state the \
             recovery does not restore to its value at that point",
            w.from, w.iwc
        )),
        _ => Ok(()),
    }
}

/// Inside a re-run function: records why the operation it starts (`doing`) is refused and
/// returns true (the caller then neither sends it nor consumes the log for it).
pub(crate) fn refuse_operation(rt: &CdRuntime, doing: impl FnOnce() -> String) -> bool {
    let Some(r) = rt.relaxed.rerunning.borrow().clone() else {
        return false;
    };
    rt.relaxed.replay_errors.borrow_mut().push(format!(
        "the replayed rpc `{}` from rank {} (IWC {}) started {}: a replayed rpc function may \
         only change this rank's memory and state",
        r.name,
        r.from,
        r.iwc,
        doing()
    ));
    true
}

/// Before replaying: refuses incoming requests whose function started operations in the first
/// execution (they are in `log`), and requests that ran before a region of `globals` was
/// copied (the copy may hold their effects: a combining one would apply twice, and what the
/// function does is not known here).
pub(crate) fn check(
    log: &[LogEntry],
    writes: &[Incoming],
    globals: &[PreservedRegion],
) -> Result<(), String> {
    for w in writes {
        let IncomingWhat::Rpc { name, .. } = &w.what else {
            continue;
        };
        if let Some(e) = log.iter().find(|e| e.request == Some(w.iwc)) {
            return Err(format!(
                "the rpc `{name}` from rank {} (IWC {}) started operations here (LSN {}); \
                 replaying rpc functions that communicate, allocate or draw random numbers is \
                 not supported (their operations cannot be matched to the log)",
                w.from, w.iwc, e.lsn
            ));
        }
        if let Some(g) = globals.iter().find(|g| w.iwc <= g.iwc_after) {
            return Err(format!(
                "the rpc `{name}` from rank {} (IWC {}) ran here before the copy of `{}` was \
                 complete, so the copy may hold its effects and replaying it may apply them \
                 twice; synchronize before preserving regions that others update",
                w.from, w.iwc, g.name
            ));
        }
    }
    Ok(())
}
