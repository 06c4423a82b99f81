//! Who wrote into this rank: the marks that let a recovering rank ask only its writers for
//! their logs, instead of every member of the LCSA's team.
//!
//! Each rank owns a table of one word per rank in its segment. The first time a rank writes
//! into a target (a put, a writing atomic, an rpc request) while a logging relaxed CD runs
//! under a given LCSA instance, it stores that instance's *generation* (the LCSA frame's id,
//! the same on every member of the team) into its word of the target's table, with an
//! uncounted put: one word per (writer, target, LCSA instance), before the write itself
//! leaves. A recovering rank F reads its table and asks the ranks whose word holds its own
//! LCSA's generation.
//!
//! The marks are a hint, never the proof: the gap check of the IWC sequence still decides
//! whether the gathered writes are complete, and when it finds a gap after asking the marked
//! writers, F asks every other member of the team too (`gather::gather_writes`). A mark can
//! be missing when the writer was inside an rpc handler (where it cannot wait for a put),
//! when F lost its memory (the table is poisoned with the rest of the segment), or when the
//! writer's LCSA was a nested strict CD; those recoveries cost what they did before the marks.
//! An extra mark (a writer of an earlier attempt of the same LCSA) costs one empty answer.
//!
//! The word after the table is the rank's *fence* word, raised while it replays its log
//! (`fence.rs`): marking and then reading that word is how a writer that never wrote into the
//! rank before learns that it must wait.

use std::cell::RefCell;

use pgas::GlobalPtr;
use pgas::runtime_hooks::{self as resilience, internal};

/// This rank's table in its segment (one word per rank, then the fence word), every rank's
/// table address, and the generation this rank last marked in each target's table.
pub(crate) struct WriterMarks {
    tables: Vec<GlobalPtr<u64>>,
    marked: RefCell<Vec<u64>>,
}

/// The generation of an LCSA frame id; never 0, the value of a word no writer marked.
pub(crate) fn generation(lcsa_id: u64) -> u64 {
    lcsa_id.max(1)
}

impl WriterMarks {
    /// Allocates this rank's table and learns every rank's: collective over the world.
    pub(crate) fn new() -> WriterMarks {
        let ranks = pgas::rank_n();
        let tables = internal(|| {
            let mine = pgas::new_array::<u64>(ranks + 1)
                .unwrap_or_else(|e| panic!("cd-runtime: no room for the writer marks: {e}"));
            for i in 0..=ranks {
                (mine + i).write_local(0).expect("own table");
            }
            pgas::allgather(mine).wait()
        });
        WriterMarks {
            tables,
            marked: RefCell::new(vec![0; ranks]),
        }
    }

    /// Marks this rank (`me`) as a writer into `target` under generation `generation`, unless it
    /// already did or cannot now (inside a handler, where a put to another host would wait).
    /// True if it marked now: the caller then checks `target`'s fence word.
    pub(crate) fn mark(&self, me: usize, target: usize, generation: u64) -> bool {
        if target == me || self.marked.borrow()[target] == generation || resilience::in_handler() {
            return false;
        }
        self.marked.borrow_mut()[target] = generation;
        resilience::rput_uncounted(&[generation], self.tables[target] + me);
        true
    }

    /// The fence word of `rank` (`fence.rs`).
    pub(crate) fn fence_word(&self, rank: usize) -> GlobalPtr<u64> {
        self.tables[rank] + self.tables.len()
    }

    /// The ranks whose mark in this rank's table is `generation`, in rank order.
    pub(crate) fn writers(&self, me: usize, generation: u64) -> Vec<usize> {
        let table = self.tables[me];
        (0..self.tables.len())
            .filter(|&r| r != me && (table + r).read_local().expect("own table") == generation)
            .collect()
    }
}
