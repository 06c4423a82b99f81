//! The generations of the covered strict CD (`REAL_LOSS.md`): each rank's own, and the copies
//! it holds for other ranks as their buddy, kept in memory across the rerun of the body after
//! a lost process; the rpc functions that store a copy at the buddy and fetch it back.
//!
//! The store lives in a thread-local of the rank thread, not in the `CdRuntime`: a recovery
//! makes the runtime anew, and the store is what must outlive it. It is emptied when a launch
//! starts without a recovery behind it ([`reset`]).

use std::cell::RefCell;

use pgas::runtime_hooks::internal;
use pgas::{RpcFn, RpcTable};
use serde::{Deserialize, Serialize};

use crate::buddy::Bytes;

/// Generations kept of each rank, at each place: ranks are at most one agreement of the
/// covered CD apart, so the newest common one is at most one behind anyone's newest (the
/// argument is in `REAL_LOSS.md`); one more is margin.
pub(crate) const KEEP: usize = 3;

/// The state one rank's execution of the covered CD started from, as its preserve calls saved
/// it in the first attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Generation {
    /// The CD's name.
    pub(crate) cd: String,
    /// Its level.
    pub(crate) level: usize,
    /// The execution (the CD's iteration) this state starts.
    pub(crate) iteration: u64,
    /// The loop step that execution began with.
    pub(crate) step: u64,
    /// The entries, encoded by `resume::write_entries`.
    pub(crate) entries: Bytes,
}

/// What one rank keeps.
#[derive(Default)]
struct Store {
    /// Whether this launch keeps generations (spares were asked for).
    enabled: bool,
    /// The covered CD: the first strict CD at level 1 spanning every rank that began.
    cd: Option<String>,
    /// This rank's own generations, oldest first.
    own: Vec<Generation>,
    /// The generations held for other ranks, by owner, oldest first.
    held: Vec<(usize, Vec<Generation>)>,
}

thread_local! {
    static STORE: RefCell<Store> = RefCell::new(Store::default());
}

/// Pushes `g` into `list`, replacing one of the same execution, keeping the newest [`KEEP`].
fn push(list: &mut Vec<Generation>, g: Generation) {
    list.retain(|x| x.iteration != g.iteration);
    list.push(g);
    list.sort_by_key(|x| x.iteration);
    let extra = list.len().saturating_sub(KEEP);
    list.drain(..extra);
}

/// Starts a launch on this rank: without a recovery behind it the store is emptied and keeps
/// generations when `enabled`; after a recovery it keeps what it holds.
pub(crate) fn reset(recovered: bool, enabled: bool) {
    STORE.with(|s| {
        let mut s = s.borrow_mut();
        if !recovered {
            *s = Store::default();
        }
        s.enabled = enabled;
    });
}

/// Whether an execution of `cd` (a strict CD at level 1 spanning every rank) is captured: the
/// first such CD to begin becomes the covered one.
pub(crate) fn covers(cd: &str) -> bool {
    STORE.with(|s| {
        let mut s = s.borrow_mut();
        if !s.enabled {
            return false;
        }
        match &s.cd {
            Some(c) => c == cd,
            None => {
                s.cd = Some(cd.to_string());
                true
            }
        }
    })
}

/// Keeps `g` as this rank's own.
pub(crate) fn keep_own(g: Generation) {
    STORE.with(|s| push(&mut s.borrow_mut().own, g));
}

/// Keeps `g` as the copy of `owner`'s.
fn keep_held(owner: usize, g: Generation) {
    STORE.with(|s| {
        let mut s = s.borrow_mut();
        match s.held.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, list)) => push(list, g),
            None => s.held.push((owner, vec![g])),
        }
    });
}

/// What one rank offers to the resume agreement: the executions of its own generations, and
/// for each owner the executions it holds of theirs.
pub(crate) type Offer = (Vec<u64>, Vec<(usize, Vec<u64>)>);

/// This rank's [`Offer`].
pub(crate) fn offer() -> Offer {
    STORE.with(|s| {
        let s = s.borrow();
        let its = |l: &[Generation]| l.iter().map(|g| g.iteration).collect::<Vec<_>>();
        (
            its(&s.own),
            s.held.iter().map(|(o, l)| (*o, its(l))).collect(),
        )
    })
}

/// This rank's own generation of execution `iteration`.
pub(crate) fn own(iteration: u64) -> Option<Generation> {
    STORE.with(|s| {
        s.borrow()
            .own
            .iter()
            .find(|g| g.iteration == iteration)
            .cloned()
    })
}

/// The copy of `owner`'s generation of execution `iteration` held here.
fn held(owner: usize, iteration: u64) -> Option<Generation> {
    STORE.with(|s| {
        let s = s.borrow();
        let (_, list) = s.held.iter().find(|(o, _)| *o == owner)?;
        list.iter().find(|g| g.iteration == iteration).cloned()
    })
}

/// Drops every generation after execution `iteration` (of the abandoned run after the
/// resume point), here and of every owner.
pub(crate) fn forget_after(iteration: u64) {
    STORE.with(|s| {
        let mut s = s.borrow_mut();
        s.own.retain(|g| g.iteration <= iteration);
        for (_, l) in s.held.iter_mut() {
            l.retain(|g| g.iteration <= iteration);
        }
    });
}

/// The rpc functions of the generations.
#[derive(Clone, Copy)]
pub(crate) struct GenerationRpcs {
    store: RpcFn<(usize, Generation), ()>,
    fetch: RpcFn<(usize, u64), Option<Generation>>,
}

impl GenerationRpcs {
    /// Registers the functions in `rpcs` (before launch, on every rank alike).
    pub(crate) fn register(rpcs: &mut RpcTable) -> GenerationRpcs {
        GenerationRpcs {
            // One insertion when the whole message has arrived: a copy the owner was sending
            // when it died is whole here or absent.
            store: rpcs.register("cd.generations.store", |(owner, g): (usize, Generation)| {
                keep_held(owner, g)
            }),
            fetch: rpcs.register("cd.generations.fetch", |(owner, it): (usize, u64)| {
                held(owner, it)
            }),
        }
    }

    /// Sends `g`, `owner`'s generation, to `buddy`, and waits until it is kept there; `sent`
    /// runs between the send and the wait (a named kill point of the tests).
    pub(crate) fn store_at(&self, buddy: usize, owner: usize, g: Generation, sent: impl FnOnce()) {
        internal(|| {
            let f = pgas::rpc(buddy, self.store, (owner, g));
            sent();
            f.wait()
        })
    }

    /// The copy of `owner`'s generation of execution `iteration` that `holder` keeps.
    pub(crate) fn fetch_from(
        &self,
        holder: usize,
        owner: usize,
        iteration: u64,
    ) -> Option<Generation> {
        internal(|| pgas::rpc(holder, self.fetch, (owner, iteration)).wait())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(iteration: u64) -> Generation {
        Generation {
            cd: "step".into(),
            level: 1,
            iteration,
            step: iteration,
            entries: Bytes(vec![iteration as u8]),
        }
    }

    #[test]
    fn the_newest_are_kept_and_a_rerun_execution_replaces_its_generation() {
        reset(false, true);
        assert!(covers("step"));
        assert!(!covers("other"));
        for i in 0..5 {
            keep_own(g(i));
        }
        keep_held(3, g(7));
        assert_eq!(offer(), (vec![2, 3, 4], vec![(3, vec![7])]));
        forget_after(3);
        keep_own(g(3));
        assert_eq!(offer(), (vec![2, 3], vec![(3, vec![])]));
        reset(true, true);
        assert_eq!(offer().0, vec![2, 3]);
        reset(false, false);
        assert_eq!(offer(), (vec![], vec![]));
        assert!(!covers("step"));
    }
}
