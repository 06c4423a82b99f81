//! The log of forward execution: entries appended to the innermost logging relaxed CD's
//! store when an operation starts (so LSNs follow program order), completed by operation id
//! when its ack, reply or bytes arrive, and spilled to files past the CD's memory budget.

use std::rc::Rc;

use crate::clock;
use crate::frame::{CdKind, Frame};
use crate::relaxed::log_store::{EntryKind, LogEntry, LoggedOp};
use crate::relaxed::{dependencies, fence, replica, writers};
use crate::runtime::CdRuntime;

/// The innermost relaxed CD that logs.
pub(crate) fn logging_frame(rt: &CdRuntime) -> Option<Rc<Frame>> {
    rt.frames
        .borrow()
        .iter()
        .rev()
        .find(|f| f.kind == CdKind::Relaxed && f.settings.logging)
        .cloned()
}

/// Appends an entry for operation `op` to the innermost logging relaxed CD's store, and
/// notes the operation for a tracking strict CD around it (grown notes go to the buddy when a
/// loss could use them). Returns the entry's LSN (`None`: no relaxed CD logs).
pub(crate) fn log(rt: &CdRuntime, op: u64, kind: EntryKind) -> Option<u64> {
    let start = clock::now();
    let frame = logging_frame(rt);
    if let Some(lcsa) = dependencies::note(rt, &kind, frame.is_some()) {
        // Before the operation is performed: a loss at any point leaves its notes.
        if replica::ships_notes(&lcsa) {
            replica::ship_notes(rt, &lcsa);
        }
    }
    let frame = frame?;
    let written = match &kind {
        EntryKind::Write { target, .. } | EntryKind::Rpc { target, .. } => Some(*target),
        EntryKind::Atomic { target, op, .. } if *op != LoggedOp::Load => Some(*target),
        _ => None,
    };
    if let Some(target) = written {
        let generation = writers::generation(rt.lcsa().id);
        let marked = rt.relaxed.writers.mark(rt.rank, target, generation);
        fence::before_write(rt, target, marked);
    }
    let lsn = rt.relaxed.next_lsn();
    let e = LogEntry {
        lsn,
        ec: pgas::runtime_hooks::epoch(),
        op,
        // An rpc function serving another rank's request started it: a replay of that
        // request must know (see `incoming_rpc`).
        request: pgas::runtime_hooks::serving_request().map(|r| r.iwc),
        kind,
    };
    let size = e.size() as u64;
    frame.rx.borrow_mut().store.push(e);
    if let Some(limit) = frame.settings.log_spill_bytes {
        spill(rt, &frame, limit);
    }
    let mut rx = frame.rx.borrow_mut();
    rx.logged.entries += 1;
    rx.logged.bytes += size;
    rx.logged.ticks += clock::since(start);
    Some(lsn)
}

/// Completes the entry of operation `op` in the innermost logging relaxed CD's store.
pub(crate) fn complete(rt: &CdRuntime, op: u64, f: impl FnOnce(&mut EntryKind)) {
    let Some(frame) = logging_frame(rt) else {
        return;
    };
    let mut rx = frame.rx.borrow_mut();
    if let Some(e) = rx.store.find_op_mut(op) {
        let before = e.size();
        f(&mut e.kind);
        let grown = e.size().saturating_sub(before) as u64;
        rx.logged.bytes += grown;
    }
}

/// Spills the oldest entries of `frame`'s store past `limit` bytes in memory.
pub(crate) fn spill(rt: &CdRuntime, frame: &Frame, limit: u64) {
    let dir = rt.file_dir.join("logs");
    let stem = format!("{:016x}", frame.id);
    let n = frame
        .rx
        .borrow_mut()
        .store
        .maybe_spill(limit as usize, &dir, &stem)
        .unwrap_or_else(|e| {
            panic!(
                "CD {:?}: cannot spill its log to {}: {e}",
                frame.name,
                dir.display()
            )
        });
    if n > 0 {
        rt.stats
            .borrow_mut()
            .entry(&frame.name, frame.level)
            .entries_spilled += n as u64;
    }
}
