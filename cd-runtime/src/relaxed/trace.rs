//! What one recovery of a relaxed CD did, event by event: kept per rank (the most recent
//! ones) for tests and diagnostics (`relaxed::recoveries`, feature `testing`).

/// One event of a recovery, in the order it happened (for tests and diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayEvent {
    /// An incoming write applied: its initiator, EC and IWC.
    Incoming {
        /// The initiator rank.
        from: usize,
        /// Its epoch at the target.
        ec: u64,
        /// Its IWC at the target.
        iwc: u64,
    },
    /// An incoming rpc request replayed: its function ran again (a result other than the
    /// logged reply is a replay error).
    IncomingRpc {
        /// The initiator rank.
        from: usize,
        /// Its epoch at the target.
        ec: u64,
        /// Its IWC at the target.
        iwc: u64,
        /// The function's registered name.
        name: String,
    },
    /// An incoming combining write that had landed before the CD's copy of its region was
    /// taken: the restored copy holds it, so it is not applied again.
    InCopy {
        /// The initiator rank.
        from: usize,
        /// Its IWC at the target.
        iwc: u64,
    },
    /// A put or replacing atomic that landed before the CD began, written again at the start
    /// of the replay because a write in the window had replaced its bytes
    /// (`replay::rebuild_overwritten`).
    Rebuilt {
        /// The initiator rank.
        from: usize,
        /// Its IWC at the target.
        iwc: u64,
    },
    /// A synchronization of the re-executed body advanced the EC to this value.
    Epoch(u64),
    /// A logged entry served to the re-executed body (read, atomic, rpc reply, fetch,
    /// collective, rng draw, allocation).
    Served {
        /// The entry's LSN.
        lsn: u64,
        /// What it was.
        what: &'static str,
    },
    /// An outgoing write squashed (matched the log).
    Squashed {
        /// The entry's LSN.
        lsn: u64,
    },
    /// A completed CD's privatized region (its byte offset) re-executed into shadow memory.
    Shadowed {
        /// The region's byte offset in this rank's segment.
        offset: usize,
    },
    /// The log ran out: forward mode from this EC on.
    Forward {
        /// The EC at the switch.
        ec: u64,
    },
}

/// What one recovery of a relaxed CD on this rank did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryTrace {
    /// The CD's name.
    pub cd: String,
    /// This rank.
    pub rank: usize,
    /// The CD's EC and IWC at begin.
    pub ec_begin: u64,
    /// See `ec_begin`.
    pub iwc_begin: u64,
    /// This rank's IWC when recovery started (the last incoming write to replay).
    pub iwc_end: u64,
    /// The ranks asked for their logs.
    pub asked: Vec<usize>,
    /// The events in order.
    pub events: Vec<ReplayEvent>,
}
