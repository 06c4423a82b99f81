//! The program's set-up values kept across the rerun of the body after a lost process
//! ([`crate::setup_once`], `REAL_LOSS.md`): each rank's own, and the copies it holds for other
//! ranks as their buddy; the rpc functions that store a copy at the buddy and fetch it back.
//!
//! As the generations' store (`generations.rs`), it lives in a thread-local of the rank
//! thread, outside the `CdRuntime` that a recovery makes anew, and is emptied when a launch
//! starts without a recovery behind it ([`reset`]).

use std::cell::RefCell;
use std::collections::BTreeMap;

use pgas::runtime_hooks::internal;
use pgas::{RpcFn, RpcTable};

use crate::buddy::Bytes;

/// What one rank keeps.
#[derive(Default)]
struct Store {
    /// Whether this launch keeps set-up values (spares were asked for).
    enabled: bool,
    /// This rank's own values, by name.
    own: BTreeMap<String, Bytes>,
    /// The values held for other ranks, by owner and name.
    held: BTreeMap<(usize, String), Bytes>,
}

thread_local! {
    static STORE: RefCell<Store> = RefCell::new(Store::default());
}

/// Starts a launch on this rank: without a recovery behind it the store is emptied and keeps
/// values when `enabled`; after a recovery it keeps what it holds.
pub(crate) fn reset(recovered: bool, enabled: bool) {
    STORE.with(|s| {
        let mut s = s.borrow_mut();
        if !recovered {
            *s = Store::default();
        }
        s.enabled = enabled;
    });
}

/// Whether this launch keeps set-up values.
pub(crate) fn enabled() -> bool {
    STORE.with(|s| s.borrow().enabled)
}

/// Keeps `bytes` as this rank's value `name`.
pub(crate) fn keep_own(name: &str, bytes: Bytes) {
    STORE.with(|s| s.borrow_mut().own.insert(name.to_string(), bytes));
}

/// This rank's own value `name`.
pub(crate) fn own(name: &str) -> Option<Bytes> {
    STORE.with(|s| s.borrow().own.get(name).cloned())
}

/// Whether this rank holds `owner`'s value `name`.
pub(crate) fn holds(owner: usize, name: &str) -> bool {
    STORE.with(|s| s.borrow().held.contains_key(&(owner, name.to_string())))
}

/// The rpc functions of the set-up values.
#[derive(Clone, Copy)]
pub(crate) struct SetupRpcs {
    store: RpcFn<(usize, String, Bytes), ()>,
    fetch: RpcFn<(usize, String), Option<Bytes>>,
}

impl SetupRpcs {
    /// Registers the functions in `rpcs` (before launch, on every rank alike).
    pub(crate) fn register(rpcs: &mut RpcTable) -> SetupRpcs {
        SetupRpcs {
            // One insertion when the whole message has arrived: a copy the owner was sending
            // when it died is whole here or absent.
            store: rpcs.register(
                "cd.setup_values.store",
                |(owner, name, bytes): (usize, String, Bytes)| {
                    STORE.with(|s| s.borrow_mut().held.insert((owner, name), bytes));
                },
            ),
            fetch: rpcs.register("cd.setup_values.fetch", |(owner, name): (usize, String)| {
                STORE.with(|s| s.borrow().held.get(&(owner, name)).cloned())
            }),
        }
    }

    /// Sends `owner`'s value `name` to `buddy` and waits until it is kept there.
    pub(crate) fn store_at(&self, buddy: usize, owner: usize, name: &str, bytes: Bytes) {
        internal(|| pgas::rpc(buddy, self.store, (owner, name.to_string(), bytes)).wait())
    }

    /// The copy of `owner`'s value `name` that `holder` keeps.
    pub(crate) fn fetch_from(&self, holder: usize, owner: usize, name: &str) -> Option<Bytes> {
        internal(|| pgas::rpc(holder, self.fetch, (owner, name.to_string())).wait())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_outlive_a_recovered_launch_and_go_with_a_new_one() {
        reset(false, true);
        assert!(enabled());
        keep_own("op", Bytes(vec![1, 2]));
        STORE.with(|s| (s.borrow_mut().held).insert((3, "op".into()), Bytes(vec![9])));
        reset(true, true);
        assert_eq!(own("op"), Some(Bytes(vec![1, 2])));
        assert!(holds(3, "op") && !holds(2, "op") && !holds(3, "other"));
        reset(false, false);
        assert!(!enabled());
        assert_eq!(own("op"), None);
        assert!(!holds(3, "op"));
    }
}
