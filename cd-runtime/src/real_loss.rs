//! A killed process recovered by strict CDs (`REAL_LOSS.md`): each execution of the covered
//! CD kept as a generation (here and at the buddy) when it completes, and after a recovery the
//! resume point agreed over every rank and its state handed to the resume machinery
//! (`resume.rs`), as a restart from a checkpoint does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use pgas::runtime_hooks::internal;

use crate::buddy::{Bytes, buddy_map};
use crate::frame::Frame;
use crate::generations::{self, Generation, Offer};
use crate::resume::{Resume, ResumeSource, Resumed, decode_entries, write_entries};
use crate::runtime::{CdRuntime, eprint_line};

/// An execution of strict CD `frame` begins (first attempt): if it is the covered CD (level 1,
/// every rank) in a launch that keeps generations, its preserve calls capture what they save.
pub(crate) fn begin(frame: &Frame) {
    if frame.level != 1
        || frame.team.rank_n() != pgas::rank_n()
        || !generations::covers(&frame.name)
    {
        return;
    }
    let shared = frame.capture.borrow().is_some();
    if !shared {
        *frame.capture.borrow_mut() = Some(BTreeMap::new());
    }
    frame.generation.set(Some(shared));
}

/// An execution of `frame` completed (its agreement said so on every rank): its capture is
/// kept as this rank's generation and sent to the buddy, whose reply is waited for, so that a
/// rank entering the next agreement has its copy at the buddy.
pub(crate) fn completed(rt: &CdRuntime, frame: &Frame) {
    let Some(shared) = frame.generation.get() else {
        return;
    };
    let entries = if shared {
        frame.capture.borrow().clone()
    } else {
        frame.capture.borrow_mut().take()
    };
    let Some(entries) = entries else {
        return;
    };
    let mut bytes = Vec::new();
    write_entries(&entries, |p| {
        bytes.extend_from_slice(p);
        Ok(())
    })
    .expect("writing into a vector does not fail");
    let g = Generation {
        cd: frame.name.clone(),
        level: frame.level,
        iteration: frame.iteration,
        step: frame.first_step.get().unwrap_or(frame.iteration),
        entries: Bytes(bytes),
    };
    generations::keep_own(g.clone());
    let n = pgas::rank_n();
    let nodes: Vec<usize> = (0..n).map(pgas::node_of).collect();
    let buddy = buddy_map(&nodes, rt.config.buddy_domain)[rt.rank];
    if buddy != rt.rank {
        rt.gen_rpcs.store_at(buddy, rt.rank, g, || {
            crate::injector::kill_at("buddy_copy", rt.rank, frame.iteration)
        });
    }
}

/// Whether rank `r` takes its generation from a rank that holds its copy: it was `lost`, or
/// it holds none of its own (a replacement of an earlier loss whose resume a second loss cut
/// short, before its body kept one). The same at every rank: `offers` were allgathered.
fn from_copies(offers: &[Offer], lost: &[usize], r: usize) -> bool {
    lost.contains(&r) || offers[r].0.is_empty()
}

/// The generations available for each rank: its own, or the copies any rank holds when it
/// takes them from copies ([`from_copies`]). `offers` is every rank's [`generations::offer`].
fn available(offers: &[Offer], lost: &[usize]) -> Vec<BTreeSet<u64>> {
    (0..offers.len())
        .map(|r| {
            if from_copies(offers, lost, r) {
                offers
                    .iter()
                    .flat_map(|(_, held)| held.iter().filter(|(o, _)| *o == r))
                    .flat_map(|(_, its)| its.iter().copied())
                    .collect()
            } else {
                offers[r].0.iter().copied().collect()
            }
        })
        .collect()
}

/// The execution every rank resumes at: the latest available for every rank.
fn common(available: &[BTreeSet<u64>]) -> Option<u64> {
    let mut it = available.iter();
    let first = it.next()?.clone();
    it.fold(first, |acc, s| acc.intersection(s).copied().collect())
        .last()
        .copied()
}

/// After a recovery, before the body (collective over every rank, survivors and
/// replacements alike): agrees on the execution of the covered CD to resume at, fetches a
/// replacement's state from a rank that holds its copy, and hands the position and the state
/// to the resume machinery. With no common generation it says so and returns false: the body
/// starts from its beginning, or from the newest checkpoint on disk when `on_disk` names it.
pub(crate) fn resume(rt: &CdRuntime, lost: &[usize], on_disk: Option<&Path>) -> bool {
    let offers = internal(|| pgas::allgather(generations::offer()).wait());
    if let Some(r) = pgas::runtime_hooks::recovered() {
        crate::injector::kill_at("resume", rt.rank, r.epoch);
    }
    let chosen = common(&available(&offers, lost));
    let mine = chosen.map(|it| {
        if !from_copies(&offers, lost, rt.rank) {
            return generations::own(it).expect("offered, so kept");
        }
        let holder = offers
            .iter()
            .position(|(_, held)| {
                held.iter()
                    .any(|(o, its)| *o == rt.rank && its.contains(&it))
            })
            .expect("available, so some rank offered it");
        rt.gen_rpcs
            .fetch_from(holder, rt.rank, it)
            .expect("offered by the holder, so kept until this fetch")
    });
    // The holders serve the fetches while they wait here.
    internal(pgas::barrier);
    let lead = rt.rank == 0;
    let Some(g) = mine else {
        if lead {
            let then = on_disk.map_or("every rank runs the body from its beginning".into(), |d| {
                format!(
                    "the job resumes from its newest whole checkpoint in {}",
                    d.display()
                )
            });
            eprint_line(&format!(
                "cd: rank(s) {lost:?} lost and replaced by spares; no execution of the covered \
                 strict CD is held in memory for every rank, so {then}"
            ));
        }
        return false;
    };
    generations::forget_after(g.iteration);
    let entries = decode_entries(&g.entries.0).unwrap_or_else(|e| {
        panic!(
            "cd: the generation of execution {} kept in memory does not decode: {e}",
            g.iteration
        )
    });
    if lead {
        eprint_line(&format!(
            "cd: rank(s) {lost:?} lost and replaced by spares; resuming CD {:?} at execution {} \
             (step {}) from memory",
            g.cd, g.iteration, g.step
        ));
    }
    let at = Resumed {
        cd: g.cd,
        level: g.level,
        iteration: g.iteration,
        step: g.step,
        source: ResumeSource::Memory(lost.to_vec()),
    };
    rt.set_next_iteration(&at.cd, at.iteration);
    *rt.checkpoint.resumed.borrow_mut() = Some(at.clone());
    *rt.checkpoint.resume.borrow_mut() = Some(Resume { at, entries });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_common_execution_is_chosen_a_lost_ranks_from_its_holders() {
        // Rank 1 passed agreement 5, rank 0 did not; rank 2 was lost, rank 0 holds 3..=4 of it
        // (its 5 never arrived).
        let offers = vec![
            (vec![2, 3, 4], vec![(2, vec![3, 4])]),
            (vec![3, 4, 5], vec![]),
            (vec![], vec![]),
        ];
        let a = available(&offers, &[2]);
        assert_eq!(a[2], BTreeSet::from([3, 4]));
        assert_eq!(common(&a), Some(4));
        // The lost rank's buddy died too: nothing in common.
        let offers = vec![(vec![3, 4], vec![]), (vec![3, 4], vec![]), (vec![], vec![])];
        assert_eq!(common(&available(&offers, &[2])), None);
    }

    #[test]
    fn a_replacement_whose_resume_was_cut_short_takes_its_copies_again() {
        // Rank 1 was replaced in an earlier recovery and a second loss (rank 2) cut its resume
        // short: it holds nothing of its own, rank 0 holds its copies, rank 3 holds rank 2's.
        let offers = vec![
            (vec![6, 7], vec![(1, vec![6, 7])]),
            (vec![], vec![]),
            (vec![6, 7], vec![]),
            (vec![6, 7], vec![(2, vec![6, 7])]),
        ];
        assert!(from_copies(&offers, &[2], 1) && from_copies(&offers, &[2], 2));
        assert!(!from_copies(&offers, &[2], 0));
        assert_eq!(common(&available(&offers, &[2])), Some(7));
    }
}
