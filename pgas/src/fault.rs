//! Fault emulation for resilience testing: the loss of a rank's shared memory.

use crate::local_view;
use crate::runtime::{self, RESERVED};

/// Byte pattern written over lost memory; never a plausible value of a program's data.
pub const POISON: u8 = 0xDB;

/// Emulates the loss of this rank's node memory: fills the shared segment and the viewable
/// memory (except bytes under a view this rank holds open) with [`POISON`].
///
/// Allocations stay valid (the heap's bookkeeping is rebuilt on a real restart), but their
/// contents are gone, so a recovery must restore them from copies kept elsewhere. The
/// runtime's own reserved bytes are kept. Other ranks must not be accessing the segment at
/// that moment for the emulation to be exact (a real loss would not wait for them either).
pub fn emulate_memory_loss() {
    runtime::with(|rt| {
        let ep = rt.ep();
        let len = ep.segment_len() - RESERVED;
        ep.fill_mapped(ep.rank(), RESERVED, len, POISON)
            .expect("the program's bytes of the own segment");
        local_view::poison_own(rt, POISON);
    })
}
