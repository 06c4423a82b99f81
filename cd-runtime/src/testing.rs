//! Observability for tests (feature `testing`): counters of the runtime that applications do
//! not need.

use crate::runtime;

/// Slots this rank asked its buddy for so far on the buddy medium (one per entry in a steady
/// loop of CDs, whose later copies reuse their slots).
pub fn buddy_slot_requests() -> u64 {
    runtime::with(|rt| rt.buddy.slot_requests())
}
