//! The NIC-like counters of one rank: the Epoch Counter (EC) and the Incoming Write Counter (IWC).
//!
//! As in the logging design of relaxed Containment Domains: software sets the EC at every synchronization; the
//! network interface bumps the IWC for every write that lands in the rank's memory, and the
//! ack of a put carries the target's (EC, IWC) back to the initiator, so that a relaxed
//! Containment Domain can later replay the writes it received epoch by epoch, in IWC order.
//!
//! # Memory ordering
//!
//! A write is counted *after* its bytes are in the segment, with a `Release` read-modify-write
//! on the IWC. The IWC's modifications form one release sequence, so a rank that reads
//! `iwc() == n` with `Acquire` sees the bytes of every one of those `n` writes: the IWC counts
//! writes that have fully landed, never one still in flight.
//!
//! A writer that puts the bytes into the target's memory itself (a thread on smp, a process
//! mapping the target's segment) reads the target's EC for the ack *before* the bytes go in
//! place ([`WriteCounting::epoch_now`], then [`WriteCounting::count_since`]), with `Acquire`,
//! so the stores of the bytes stay after that load. The target steps its EC only after it
//! has seen the bytes (a flag it waits on), with a `Release` store after that load, so the
//! ack can never name an epoch the target entered after seeing the write: a replay applies
//! the write no later than the epoch in which the target read it. (Read after the bytes, the
//! EC could be the next one: the target saw the flag, stepped, and the writer then read.)
//!
//! # Counting is a job-wide mode
//!
//! The IWC increment is a read-modify-write on the target's counter line, which every writer
//! of that target contends for, a large part of a small put's cost (`bridge-bench`,
//! `put_latency` / `8B_counted_vs_uncounted`). Only a resilience runtime reads the counters,
//! so a job counts writes only when its [`crate::LaunchConfig`] says [`WriteCounting::On`]
//! (cd-runtime's launch does). The mode is fixed before any rank starts and the same on every
//! rank and process, so no write can slip uncounted past a rank that relies on its IWC. In a
//! job that does not count, acks are [`WriteAck::UNCOUNTED`] and the IWC stays 0.
//!
//! # The counting switch ([`WriteCounting::Switched`])
//!
//! What a resilience runtime launches: counting is possible, but each target counts only
//! once it has switched counting on for itself ([`WriteCounters::switch_on`]), which
//! cd-runtime does when the rank's first relaxed CD (or dependency-tracking strict CD)
//! begins. Until then a write costs what it costs in a job that does not count: after its
//! bytes land, the writer loads the target's switch (a plain load of a line every writer
//! shares; the target writes it only when it switches) and acks [`WriteAck::UNCOUNTED`].
//!
//! The switch-on is an asymmetric Dekker handshake ([`crate::membarrier`]): the writer stores
//! the bytes, then loads the switch, with only a compiler fence between; the target stores the
//! switch, then makes every writer thread execute a full fence (`membarrier(2)`), then reads
//! the IWC. Either the writer's load comes after the target's fence, sees on and counts (the
//! IWC it produces may still be at or below the value the target reads: those bytes landed
//! before the read, with the same Release/Acquire as always), or it came before, and the
//! fence made the writer's bytes visible before the target reads anything. So an uncounted
//! write is one that landed before the switch-on: every write after it has an IWC, and the
//! IWC stays gapless, as the counted writes are exactly the ones that incremented it.
//! Switching off is a plain store: a writer that still sees on counts, which is harmless.
//!
//! The EC reported in an ack is read just after the write was counted. If the target moves to
//! a new epoch at the same instant, the write may be attributed to either epoch; that is a race
//! between an unsynchronized write and a synchronization, which the replay protocol tolerates
//! because barriers advance the EC twice (entry and exit) and every reader of the data waits
//! behind the exit.
//!
//! The loom model `tests/loom_counters.rs` checks this ordering on the code below, run on
//! loom's atomics (`crate::sync`, under `--cfg loom`).

use crate::sync::{AtomicU64, Ordering};

/// The target's counters as one write left them: its epoch, and the IWC value that write produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct WriteAck {
    /// The target's Epoch Counter when the write was applied.
    pub ec: u64,
    /// The target's Incoming Write Counter after counting this write (1 for the first write).
    pub iwc: u64,
}

impl WriteAck {
    /// The ack of a write in a job that does not count writes ([`WriteCounting::Off`]).
    pub const UNCOUNTED: WriteAck = WriteAck { ec: 0, iwc: 0 };
}

/// Whether a job counts the writes into its ranks' segments (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WriteCounting {
    /// No IWC increments; acks are [`WriteAck::UNCOUNTED`]. The default: a put costs a copy.
    #[default]
    Off,
    /// Every write is counted at its target and its ack carries the target's EC and IWC.
    On,
    /// Writes are counted at targets that switched counting on
    /// ([`crate::Endpoint::count_incoming_writes`]); elsewhere as [`WriteCounting::Off`].
    /// Where the kernel lacks `membarrier(2)` the job runs as [`WriteCounting::On`].
    Switched,
}

impl WriteCounting {
    /// Counts one write into `counters` if this job counts writes there now; the ack
    /// describes it. Called after the write's bytes are in place.
    #[inline]
    pub fn count(self, counters: &WriteCounters) -> WriteAck {
        match self {
            WriteCounting::On => counters.count_write(),
            WriteCounting::Off => WriteAck::UNCOUNTED,
            WriteCounting::Switched => counters.count_if_switched_on(1),
        }
    }

    /// Counts `n >= 1` writes with consecutive IWC values if this job counts writes there
    /// now; the ack describes the last one.
    #[inline]
    pub fn count_n(self, counters: &WriteCounters, n: u64) -> WriteAck {
        match self {
            WriteCounting::On => counters.count_writes(n),
            WriteCounting::Off => WriteAck::UNCOUNTED,
            WriteCounting::Switched => counters.count_if_switched_on(n),
        }
    }

    /// The target's EC for the ack of a write about to land, read before its bytes go in
    /// place (the module note on ordering); 0 in a job that does not count.
    #[inline]
    pub fn epoch_now(self, counters: &WriteCounters) -> u64 {
        match self {
            WriteCounting::Off => 0,
            _ => counters.ec(),
        }
    }

    /// [`count_n`](Self::count_n) for writes whose bytes are now in place, the ack carrying
    /// `ec` from [`epoch_now`](Self::epoch_now) before they were written.
    #[inline]
    pub fn count_since(self, counters: &WriteCounters, n: u64, ec: u64) -> WriteAck {
        let ack = self.count_n(counters, n);
        if ack == WriteAck::UNCOUNTED {
            return ack;
        }
        WriteAck { ec, iwc: ack.iwc }
    }

    /// Switches counting of the writes into `counters` (their owner's) on or off in a
    /// [`WriteCounting::Switched`] job; other modes have nothing to switch. `scope` reaches
    /// every thread that can write there.
    pub(crate) fn switch(
        self,
        counters: &WriteCounters,
        on: bool,
        scope: crate::membarrier::Scope,
    ) {
        if self == WriteCounting::Switched {
            if on {
                counters.switch_on(scope);
            } else {
                counters.switch_off();
            }
        }
    }
}

/// The mode a job asking for `wanted` runs in, this process having registered (or failed to
/// register) for the switch's barrier over `scope`: [`WriteCounting::Switched`] becomes
/// [`WriteCounting::On`] where `membarrier(2)` cannot be used.
pub(crate) fn effective_counting(
    wanted: WriteCounting,
    scope: crate::membarrier::Scope,
) -> WriteCounting {
    match wanted {
        WriteCounting::Switched if crate::membarrier::register(scope).is_err() => WriteCounting::On,
        other => other,
    }
}

/// A rank's EC and IWC; the IWC is bumped by any rank that writes here, the EC only by its owner.
///
/// `repr(C)`: the mpi conduit places a rank's counters in memory shared by the processes of a
/// node, where other processes bump them through the same atomics.
#[derive(Debug, Default)]
#[repr(C)]
pub struct WriteCounters {
    ec: AtomicU64,
    iwc: AtomicU64,
    /// Non-zero while the owner counts incoming writes ([`WriteCounting::Switched`] only).
    switch: AtomicU64,
}

impl WriteCounters {
    /// Counts one write whose bytes are already in place and returns the ack that describes it.
    #[inline]
    pub fn count_write(&self) -> WriteAck {
        let iwc = self.iwc.fetch_add(1, Ordering::Release) + 1;
        let ec = self.ec.load(Ordering::Acquire);
        WriteAck { ec, iwc }
    }

    /// Counts `n >= 1` writes whose bytes are already in place, with consecutive IWC values
    /// (no other write is counted between them); the ack describes the last one.
    #[inline]
    pub fn count_writes(&self, n: u64) -> WriteAck {
        debug_assert!(n >= 1, "count_writes(0)");
        let iwc = self.iwc.fetch_add(n, Ordering::Release) + n;
        let ec = self.ec.load(Ordering::Acquire);
        WriteAck { ec, iwc }
    }

    /// Number of writes that have landed so far (see the module note on ordering).
    #[inline]
    pub fn iwc(&self) -> u64 {
        self.iwc.load(Ordering::Acquire)
    }

    /// The current epoch.
    #[inline]
    pub fn ec(&self) -> u64 {
        self.ec.load(Ordering::Acquire)
    }

    /// Sets the epoch (only the owning rank does this).
    #[inline]
    pub fn set_ec(&self, ec: u64) {
        self.ec.store(ec, Ordering::Release);
    }

    /// [`WriteCounting::count_n`] in a [`WriteCounting::Switched`] job: counts `n >= 1`
    /// writes if the owner switched counting on.
    #[inline]
    pub fn count_if_switched_on(&self, n: u64) -> WriteAck {
        // The light side of the switch's handshake: the bytes' stores stay before the
        // switch's load (the target's membarrier orders the hardware).
        crate::membarrier::light();
        if self.switched_on() {
            self.count_writes(n)
        } else {
            WriteAck::UNCOUNTED
        }
    }

    /// Whether the owner has switched counting on ([`WriteCounting::Switched`]).
    #[inline]
    pub fn switched_on(&self) -> bool {
        // Relaxed: the ordering against the writer's bytes comes from the handshake (module
        // doc), not from this load.
        self.switch.load(Ordering::Relaxed) != 0
    }

    /// Switches counting on (the owning rank only): after this returns, every write that is
    /// not counted landed before it, and [`WriteCounters::iwc`] may be read as the count of
    /// the writes before. `scope` reaches every thread that can write here.
    pub fn switch_on(&self, scope: crate::membarrier::Scope) {
        if self.switched_on() {
            return;
        }
        self.switch.store(1, Ordering::Relaxed);
        crate::membarrier::heavy(scope);
    }

    /// Switches counting off (the owning rank only). Writers that still see it on count.
    pub fn switch_off(&self) {
        self.switch.store(0, Ordering::Relaxed);
    }
}

// Std threads at full size; under loom the models in tests/loom_*.rs take their place.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn first_write_is_one_and_carries_the_epoch() {
        let c = WriteCounters::default();
        c.set_ec(7);
        assert_eq!(c.count_write(), WriteAck { ec: 7, iwc: 1 });
        c.set_ec(9);
        assert_eq!(c.count_write(), WriteAck { ec: 9, iwc: 2 });
        assert_eq!(c.iwc(), 2);
        assert_eq!(c.ec(), 9);
    }

    #[test]
    fn the_ack_carries_the_epoch_read_before_the_bytes() {
        let c = WriteCounters::default();
        c.set_ec(4);
        let ec = WriteCounting::On.epoch_now(&c);
        // The target sees the bytes and steps before the writer counts.
        c.set_ec(5);
        assert_eq!(
            WriteCounting::On.count_since(&c, 1, ec),
            WriteAck { ec: 4, iwc: 1 }
        );
        assert_eq!(
            WriteCounting::On.count_since(&c, 2, 5),
            WriteAck { ec: 5, iwc: 3 }
        );
        assert_eq!(WriteCounting::Off.epoch_now(&c), 0);
        assert_eq!(
            WriteCounting::Off.count_since(&c, 1, 0),
            WriteAck::UNCOUNTED
        );
        assert_eq!(c.iwc(), 3);
    }

    #[test]
    fn a_job_that_does_not_count_leaves_the_counters_alone() {
        let c = WriteCounters::default();
        c.set_ec(3);
        assert_eq!(WriteCounting::Off.count(&c), WriteAck::UNCOUNTED);
        assert_eq!(c.iwc(), 0);
        assert_eq!(WriteCounting::On.count(&c), WriteAck { ec: 3, iwc: 1 });
        assert_eq!(WriteCounting::default(), WriteCounting::Off);
    }

    #[test]
    fn count_writes_reserves_consecutive_values() {
        let c = WriteCounters::default();
        c.set_ec(2);
        c.count_write();
        assert_eq!(c.count_writes(3), WriteAck { ec: 2, iwc: 4 });
        assert_eq!(c.count_write().iwc, 5);
    }

    #[test]
    fn concurrent_writers_get_distinct_consecutive_values() {
        let c = Arc::new(WriteCounters::default());
        let per = 10_000;
        let all: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let c = &c;
                    s.spawn(move || (0..per).map(|_| c.count_write().iwc).collect::<Vec<_>>())
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = all.clone();
        sorted.sort_unstable();
        let expected: Vec<u64> = (1..=4 * per as u64).collect();
        assert_eq!(sorted, expected);
    }
}
