//! The replay of a recovering relaxed CD's log: the entries, the cursor the re-executed body
//! advances, and the switch to forward mode when the log runs out. The recovery that fills it
//! and the mode that serves from it are `replay.rs` and `modes/replay.rs`.

use pgas::runtime_hooks as resilience;

use crate::relaxed::log_store::{EntryKind, LogEntry};

/// The replay of the recovering CD's log.
#[derive(Debug)]
pub(crate) struct Replay {
    pub(crate) cd: String,
    pub(crate) level: usize,
    entries: Vec<LogEntry>,
    cursor: usize,
    pub(crate) replayed: u64,
    pub(crate) squashed: u64,
    /// The log ran out: the body runs forward (the replay stays for the privatized regions
    /// at the end and the counts).
    pub(crate) forward: bool,
    /// F's IWC when recovery started, and the writes F made into itself while replaying:
    /// any other write landing before the switch to forward mode may have been overwritten
    /// by (or read in place of) an older replayed one.
    iwc_end: u64,
    pub(crate) own_during: u64,
}

impl Replay {
    /// The replay of `entries`, the log of the CD `cd` at `level`, recovering on a rank whose
    /// IWC was `iwc_end` when the recovery started.
    pub(crate) fn new(cd: String, level: usize, entries: Vec<LogEntry>, iwc_end: u64) -> Replay {
        Replay {
            cd,
            level,
            entries,
            cursor: 0,
            replayed: 0,
            squashed: 0,
            forward: false,
            iwc_end,
            own_during: 0,
        }
    }

    /// Switches to forward mode; an error if writes of other ranks landed while replaying.
    pub(crate) fn switch_to_forward(&mut self) -> Result<(), String> {
        self.forward = true;
        let landed = resilience::incoming_writes() - self.iwc_end - self.own_during;
        if landed > 0 {
            return Err(format!(
                "{landed} write(s) from other ranks landed while the log was replayed (the \
                 writers did not wait for this rank); the replay may have overwritten them"
            ));
        }
        Ok(())
    }
}

impl Replay {
    /// The next entry for the re-executed body; `None` when the log ran out. A privatized
    /// region's entry is returned like any other (an operation meeting it diverged): a
    /// re-executed CD consumes its own at its completion ([`Replay::take_privatized`]).
    pub(crate) fn next(&mut self) -> Option<LogEntry> {
        let e = self.entries.get(self.cursor)?;
        self.cursor += 1;
        Some(e.clone())
    }

    /// If the body left entries unreplayed: how many it replayed, how many there are, and
    /// the next one's LSN.
    pub(crate) fn left_over(&self) -> Option<(usize, usize, u64)> {
        let e = self.entries.get(self.cursor)?;
        Some((self.cursor, self.entries.len(), e.lsn))
    }

    /// The entries not replayed yet.
    pub(crate) fn remaining(&self) -> &[LogEntry] {
        &self.entries[self.cursor.min(self.entries.len())..]
    }

    /// Consumes the entry at the cursor if it is the privatized region at `offset`: its LSN
    /// and logged bytes.
    pub(crate) fn take_privatized(&mut self, offset: usize) -> Option<(u64, Vec<u8>)> {
        match &self.entries.get(self.cursor)?.kind {
            EntryKind::Privatized {
                offset: o, bytes, ..
            } if *o == offset => {
                let lsn = self.entries[self.cursor].lsn;
                let bytes = bytes.0.clone();
                self.cursor += 1;
                self.replayed += 1;
                Some((lsn, bytes))
            }
            _ => None,
        }
    }
}
