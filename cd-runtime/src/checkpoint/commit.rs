//! The checkpointed CD's side of checkpointing: at the beginning of an execution, whether it
//! resumes or is captured; at its completion, the commit of the checkpoint handed over before
//! and the hand-over of this one (`README.md` beside this file).

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::checkpoint::format::{
    CheckpointPolicy, FORMAT_VERSION, Manifest, RankFile, checkpoint_dir,
};
use crate::checkpoint::state::Pending;
use crate::checkpoint::transfer;
use crate::checkpoint::writer::Written;
use crate::frame::Frame;
use crate::runtime::{CdRuntime, eprint_line};

/// An execution of `frame` begins (first attempt): it takes the resume position if it is the
/// one a restart chose, or starts capturing if its iteration is checkpointed.
pub(crate) fn begin(rt: &CdRuntime, frame: &Frame) {
    let ck = &rt.checkpoint;
    let resumes = ck.resume.borrow().as_ref().is_some_and(|r| {
        r.at.cd == frame.name && r.at.level == frame.level && r.at.iteration == frame.iteration
    });
    if resumes {
        let r = ck.resume.borrow_mut().take().expect("checked above");
        *frame.resume.borrow_mut() = Some(r.entries);
        return;
    }
    let Some(policy) = ck.policy_for(&frame.name) else {
        return;
    };
    if ck.schedule.takes(policy.every, frame.iteration) {
        assert_eq!(
            frame.team.rank_n(),
            pgas::rank_n(),
            "CD {:?} has a `checkpoint` key but spans {} of the job's {} ranks: a checkpoint \
             is the whole job's; put the key on a CD that spans every rank",
            frame.name,
            frame.team.rank_n(),
            pgas::rank_n()
        );
        *frame.capture.borrow_mut() = Some(BTreeMap::new());
    }
}

/// Whether this rank still writes the checkpoint handed over at an earlier completion of
/// `frame`'s CD: its part of the agreement that ends each execution of the checkpointed CD
/// (`strict.rs`), so that the checkpoint is committed at the first completion where no rank
/// writes any more, without a collective of its own and without waiting.
pub(crate) fn still_writing(rt: &CdRuntime, frame: &Frame) -> bool {
    transfer::poll(rt);
    rt.checkpoint
        .pending
        .borrow()
        .as_ref()
        .is_some_and(|p| p.cd == frame.name && p.level == frame.level && !transfer::written(p))
}

/// An execution of `frame` completed (the agreement said so on every rank, and whether any
/// rank still wrote the pending checkpoint, `writing`): commits the checkpoint handed over at
/// an earlier completion once every rank has written it (at the latest before handing over
/// the next one: the writer is never more than one checkpoint behind), then hands over this
/// execution's capture.
pub(crate) fn completed(rt: &CdRuntime, frame: &Frame, writing: bool) {
    let Some(policy) = rt.checkpoint.policy_for(&frame.name) else {
        return;
    };
    let capture = frame.capture.borrow_mut().take();
    if !writing || capture.is_some() {
        commit_pending(rt, &policy, Some(frame.iteration));
    }
    let Some(entries) = capture else {
        return;
    };
    let writer = rt
        .checkpoint
        .writer
        .borrow()
        .clone()
        .expect("launch gives a checkpointing job its writer");
    let dir = checkpoint_dir(&policy.dir_of(writer.lead()), &frame.name, frame.iteration);
    let remote = policy.node_local;
    let ticket = writer.write_rank(
        dir.clone(),
        rt.rank,
        rt.checkpoint.buddy.get(),
        remote,
        entries,
    );
    rt.checkpoint.schedule.handed_over(frame.iteration);
    *rt.checkpoint.pending.borrow_mut() = Some(Pending {
        dir,
        cd: frame.name.clone(),
        iteration: frame.iteration,
        step: frame.first_step.get().unwrap_or(frame.iteration),
        level: frame.level,
        ticket,
        remote,
        sent: RefCell::new(None),
        acked: RefCell::new(None),
    });
}

/// The end of the job (every rank, after the program's body): commits the pending checkpoint
/// and, on rank 0, waits until its manifest is on disk.
pub(crate) fn at_end(rt: &CdRuntime) {
    let Some((_, policy)) = rt.checkpoint.policy.borrow().clone() else {
        return;
    };
    if rt.checkpoint.pending.borrow().is_some() {
        // Every rank of this process has handed its state over once all are here (a rank
        // that failed before would keep its part from being written: the barrier unwinds on
        // that failure instead of waiting for the part forever).
        pgas::runtime_hooks::internal(pgas::barrier);
    }
    commit_pending(rt, &policy, None);
    let committing = rt.checkpoint.committing.borrow_mut().take();
    if let Some(t) = committing {
        if let Err(why) = t.wait(|| serve(rt)) {
            eprint_line(&format!("cd: checkpoint not committed: {why}"));
        }
    }
}

/// The rank's communication progress while it waits for its writer or a collective: the
/// network buddy copies move on too (a buddy that waits here answers the copies it holds).
fn serve(rt: &CdRuntime) {
    pgas::progress();
    transfer::poll(rt);
}

/// Collective over every rank when a checkpoint is pending: waits for this rank's part (only
/// if it is still being written), gathers every rank's result (and its time per execution
/// since the hand-over, for the schedule: `now` is the execution that just completed, `None`
/// at the end of the job), and on rank 0 hands the manifest (or the deletion of a checkpoint
/// a rank could not write) to the writer.
fn commit_pending(rt: &CdRuntime, policy: &CheckpointPolicy, now: Option<u64>) {
    let keep = policy.keep;
    let Some(ticket) = rt
        .checkpoint
        .pending
        .borrow()
        .as_ref()
        .map(|p| p.ticket.clone())
    else {
        return;
    };
    let own = ticket.wait(|| serve(rt));
    // A part's lead also waits for the buddy's ack of its copy (node-local directories).
    while !rt
        .checkpoint
        .pending
        .borrow()
        .as_ref()
        .is_some_and(transfer::written)
    {
        serve(rt);
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    let p = rt
        .checkpoint
        .pending
        .borrow_mut()
        .take()
        .expect("checked above");
    let mine: Written = own.and_then(|w| {
        transfer::ack(&p)
            .map(|()| w)
            .map_err(|why| format!("the buddy copy of rank {}'s part: {why}", w.part))
    });
    if let Ok(w) = &mine {
        let mut stats = rt.stats.borrow_mut();
        let s = stats.entry(&p.cd, p.level);
        s.bytes_checkpointed += w.bytes;
        s.checkpoint_write_ns += w.ns;
    }
    let execution_ns = now.map_or(0, |n| rt.checkpoint.schedule.execution_ns(n));
    let gathered = pgas::runtime_hooks::internal(|| pgas::allgather((mine, execution_ns)));
    while !gathered.is_ready() {
        serve(rt);
    }
    let all: Vec<(Written, u64)> = gathered.wait();
    if let Some(now) = now {
        // The same values on every rank: the same next checkpoint everywhere.
        let write_ns = all
            .iter()
            .filter_map(|(w, _)| w.as_ref().ok())
            .map(|w| w.ns);
        let execution_ns = all.iter().map(|(_, t)| *t).max().unwrap_or(0);
        rt.checkpoint.schedule.committed(
            policy.every,
            p.iteration,
            now,
            write_ns.max().unwrap_or(0),
            execution_ns,
        );
        if let Some(n) = rt.checkpoint.schedule.chosen() {
            rt.stats.borrow_mut().entry(&p.cd, p.level).checkpoint_every = Some(n);
        }
    }
    let writer = rt
        .checkpoint
        .writer
        .borrow()
        .clone()
        .expect("launch gives a checkpointing job its writer");
    // Rank 0 commits; in node-local directories every process's lead commits its own copy of
    // the manifest too (its directory is the only one it sees at a restart).
    let lead = rt.rank == 0;
    let commits_own = p.remote && writer.lead() == rt.rank;
    if !(lead || commits_own) {
        return;
    }
    let all: Vec<Written> = all.into_iter().map(|(w, _)| w).collect();
    // The previous commit is long done (the writer works in order, and this checkpoint's parts
    // came after it): a failure of it is said now.
    let previous = rt.checkpoint.committing.borrow_mut().take();
    if let Some(Err(why)) = previous.map(|t| t.wait(|| serve(rt))) {
        eprint_line(&format!("cd: checkpoint not committed: {why}"));
    }
    let failed = all
        .iter()
        .enumerate()
        .find_map(|(r, w)| w.as_ref().err().map(|why| (r, why.clone())));
    if let Some((r, why)) = failed {
        if !lead {
            writer.discard(p.dir);
            return;
        }
        eprint_line(&format!(
            "cd: checkpoint {} not committed: rank {r} could not write its state: {why}; the \
             run goes on, the previous checkpoint stays the newest",
            p.dir.display()
        ));
        writer.discard(p.dir);
        return;
    }
    let shape = rt
        .checkpoint
        .shape
        .borrow()
        .clone()
        .expect("launch gives a checkpointing job its shape");
    let manifest = Manifest {
        version: FORMAT_VERSION,
        program: shape.program,
        seed: format!("{:#x}", shape.seed),
        ranks: shape.ranks,
        cd: p.cd.clone(),
        level: p.level,
        iteration: p.iteration,
        step: p.step,
        rank: all
            .iter()
            .map(|w| RankFile::from(w.as_ref().expect("no rank failed")))
            .collect(),
    };
    if lead {
        rt.stats.borrow_mut().entry(&p.cd, p.level).checkpoints += 1;
    }
    let ticket = writer.commit(p.dir, manifest, keep);
    *rt.checkpoint.committing.borrow_mut() = Some(ticket);
}
