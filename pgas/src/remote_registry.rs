//! The functions of `#[pgas::remote]`, registered at link time: each one is an entry of one
//! linker section (`REMOTES`, a `linkme` distributed slice), so a program needs no table
//! and no registration code, and an rpc names its function by the entry's position in it.
//!
//! The position is only meaningful between processes running the same binary (the linker
//! lays the section out once per binary); `launch` checks that every process agrees on the
//! registered paths before any rpc is sent (`program_agreement.rs`), and every request still
//! carries a hash of the path, checked at the target.

use std::marker::PhantomData;
use std::ops::Deref;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::future::Future;

/// What an rpc function produced: bytes to send now, or a future of them.
#[doc(hidden)]
pub enum Invoked {
    /// The serialized result.
    Now(Vec<u8>),
    /// The serialized result once the function's future is ready.
    Later(Future<Vec<u8>>),
}

/// What running an rpc function on serialized arguments gives: its result, or the arguments'
/// decoding error.
#[doc(hidden)]
pub type InvokeResult = Result<Invoked, postcard::Error>;

/// The result types a remote function may return: a value sent back now, or a
/// [`Future`] whose value is sent back when it is ready.
pub trait Reply {
    /// What the caller's future gives.
    type Value: Serialize + DeserializeOwned + 'static;
    #[doc(hidden)]
    fn into_invoked(self) -> Invoked;
}

impl<T: Serialize + DeserializeOwned + 'static> Reply for T {
    type Value = T;
    fn into_invoked(self) -> Invoked {
        Invoked::Now(postcard::to_allocvec(&self).expect("serialize an rpc result"))
    }
}

impl<T: Serialize + DeserializeOwned + 'static> Reply for Future<T> {
    type Value = T;
    fn into_invoked(self) -> Invoked {
        Invoked::Later(self.then(|r| postcard::to_allocvec(&r).expect("serialize an rpc result")))
    }
}

/// Decodes the arguments and runs `f` on them (the body of every remote function's entry).
#[doc(hidden)]
pub fn invoke<A: DeserializeOwned, R: Reply>(bytes: &[u8], f: impl FnOnce(A) -> R) -> InvokeResult {
    let args: A = postcard::from_bytes(bytes)?;
    Ok(f(args).into_invoked())
}

/// FNV-1a, a stable hash of a function's name or path (the same in every process).
pub(crate) const fn name_hash(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h = (h ^ bytes[i] as u64).wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

/// One remote function in the registry: its path, the path's hash, and how to run it.
#[doc(hidden)]
pub struct RemoteEntry {
    pub(crate) path: &'static str,
    pub(crate) hash: u64,
    pub(crate) invoke: fn(&[u8]) -> InvokeResult,
}

impl RemoteEntry {
    /// The entry of the function at `path` (`#[pgas::remote]` writes it).
    pub const fn new(path: &'static str, invoke: fn(&[u8]) -> InvokeResult) -> Self {
        RemoteEntry {
            path,
            hash: name_hash(path),
            invoke,
        }
    }

    /// Its position in `REMOTES`, the number an rpc sends.
    pub(crate) fn index(&'static self) -> usize {
        let base = REMOTES.as_ptr() as usize;
        let i = (self as *const RemoteEntry as usize).wrapping_sub(base) / size_of::<Self>();
        match REMOTES.get(i) {
            Some(e) if std::ptr::eq(e, self) => i,
            // Not laid out as one array (never seen): find it.
            _ => REMOTES
                .iter()
                .position(|e| std::ptr::eq(e, self))
                .expect("a #[pgas::remote] entry outside the registry"),
        }
    }
}

/// Every `#[pgas::remote]` function of the program, in the linker's order.
#[doc(hidden)]
#[linkme::distributed_slice]
pub static REMOTES: [RemoteEntry];

/// The function registered at position `index`, if any.
pub(crate) fn remote_at(index: usize) -> Option<&'static RemoteEntry> {
    REMOTES.get(index)
}

/// The function registered under `path`, if any.
pub(crate) fn remote_named(path: &str) -> Option<&'static RemoteEntry> {
    REMOTES.iter().find(|e| e.path == path)
}

/// The paths of every registered function, in the registry's order.
pub(crate) fn remote_paths() -> impl Iterator<Item = &'static str> {
    REMOTES.iter().map(|e| e.path)
}

/// A `#[pgas::remote]` function: what [`rpc`](crate::rpc()) and [`rpc_ff`](crate::rpc_ff)
/// take, taking `A` and replying `R`; it derefs to the function `F` itself, so a call
/// `name(args)` still runs it here.
pub struct Remote<A, R, F: 'static> {
    entry: &'static RemoteEntry,
    local: F,
    _sig: PhantomData<fn(A) -> R>,
}

impl<A, R, F: Copy> Remote<A, R, F> {
    /// The handle of the registered `entry` whose function is `local`
    /// (`#[pgas::remote]` writes it).
    #[doc(hidden)]
    pub const fn new(entry: &'static RemoteEntry, local: F) -> Self {
        Remote {
            entry,
            local,
            _sig: PhantomData,
        }
    }

    /// The function's registered path (`crate::module::name`).
    pub fn path(&self) -> &'static str {
        self.entry.path
    }

    pub(crate) fn entry(&self) -> &'static RemoteEntry {
        self.entry
    }
}

impl<A, R, F: Copy> Clone for Remote<A, R, F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, R, F: Copy> Copy for Remote<A, R, F> {}

impl<A, R, F> Deref for Remote<A, R, F> {
    type Target = F;
    fn deref(&self) -> &F {
        &self.local
    }
}

impl<A, R, F> std::fmt::Debug for Remote<A, R, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remote({})", self.entry.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_hash_stably() {
        assert_eq!(name_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(name_hash("a"), name_hash("b"));
        const H: u64 = name_hash("a::b");
        assert_eq!(
            H,
            name_hash("a::b"),
            "the same at compile time and at run time"
        );
    }
}
