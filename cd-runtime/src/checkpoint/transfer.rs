//! The buddy copy over the network, for node-local checkpoint directories (`README.md` beside
//! this file, "Node-local directories"): the lead rank of a part sends the part's bytes to the
//! buddy by rpc once its own file is durable; the buddy's writer writes the copy into the
//! buddy's own directory, and only when that copy is durable does the rpc reply (the ack).
//! Until the ack the lead counts its part as still being written, so no manifest names a part
//! whose copy is not durable. On restart, a rank whose own part is gone fetches the copy's
//! bytes from the buddy by rpc.

use pgas::{Future, Promise, RpcTable};

use crate::buddy::Bytes;
use crate::checkpoint::format::{buddy_file, parse_checkpoint_name};
use crate::checkpoint::state::{CheckpointRpcs, Pending, Receiving};
use crate::runtime::{self, CdRuntime};

/// What the buddy answers a copy with: durable, or why not.
type Acked = Result<(), String>;

/// Registers the rpc functions (before launch, on every rank alike).
pub(crate) fn register(rpcs: &mut RpcTable) -> CheckpointRpcs {
    CheckpointRpcs {
        copy: rpcs.register_future(
            "cd.checkpoint.copy",
            |(name, part, bytes): (String, usize, Bytes)| receive(&name, part, bytes.0),
        ),
        fetch: rpcs.register("cd.checkpoint.fetch", |(name, part): (String, usize)| {
            serve_fetch(&name, part).map(Bytes)
        }),
    }
}

/// Whether `name` is a checkpoint's directory name (a peer's rpc names no other path).
fn checked_name(name: &str) -> Result<(), String> {
    if parse_checkpoint_name(name).is_some() && !name.contains('/') {
        Ok(())
    } else {
        Err(format!("{name:?} is not a checkpoint directory's name"))
    }
}

/// The buddy's side of a copy: queues `bytes` (the part `part` leads) to this process's writer
/// for the checkpoint `name` in this process's own directory; the reply waits until the copy
/// is durable ([`poll`] answers it).
fn receive(name: &str, part: usize, bytes: Vec<u8>) -> Future<Acked> {
    let queued = runtime::try_with(|rt| {
        checked_name(name)?;
        let ck = &rt.checkpoint;
        let (writer, policy) = match (ck.writer.borrow().clone(), ck.policy.borrow().clone()) {
            (Some(w), Some((_, p))) => (w, p),
            _ => {
                return Err(format!(
                    "rank {} keeps no checkpoints: its configuration has no checkpoint key; \
                     launch every process with the same configuration",
                    rt.rank
                ));
            }
        };
        let dir = policy.dir_of(writer.lead()).join(name);
        let ticket = writer.write_copy(dir, part, rt.rank, bytes);
        let reply = Promise::<Acked>::new();
        let future = reply.get_future();
        ck.receiving.borrow_mut().push(Receiving { ticket, reply });
        Ok(future)
    });
    match queued {
        Some(Ok(f)) => f,
        Some(Err(why)) => Future::ready(Err(why)),
        None => Future::ready(Err(
            "the buddy's job had ended: the copy was not written".into()
        )),
    }
}

/// The buddy's side of a restart: the bytes of its copy of the part `part` leads, in the
/// checkpoint `name` of the directory this launch restarts from.
fn serve_fetch(name: &str, part: usize) -> Result<Vec<u8>, String> {
    checked_name(name)?;
    runtime::try_with(|rt| {
        let root = rt.checkpoint.restart_root.borrow().clone().ok_or_else(|| {
            format!(
                "rank {} is not restarting from a checkpoint directory",
                rt.rank
            )
        })?;
        let path = buddy_file(&root.join(name), part, rt.rank);
        let mut f = crate::private_files::open_file(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(bytes)
    })
    .unwrap_or_else(|| Err("the buddy's job had ended".into()))
}

/// Moves the network copies on, without waiting: answers every copy this rank received whose
/// write is done, sends the part this rank leads once its own file is durable, and records
/// the buddy's ack. Called at every completion of the checkpointed CD and while a rank waits
/// for the commit, so that no rank waits for a buddy that waits in turn.
pub(crate) fn poll(rt: &CdRuntime) {
    let ck = &rt.checkpoint;
    let done: Vec<Receiving> = {
        let mut receiving = ck.receiving.borrow_mut();
        let (done, open) = receiving.drain(..).partition(|r| r.ticket.is_done());
        *receiving = open;
        done
    };
    for r in done {
        let w = r.ticket.wait(|| {});
        r.reply.fulfill_result(w.map(|_| ()));
        r.reply.fulfill_anonymous(1);
    }
    let pending = ck.pending.borrow();
    let Some(p) = pending.as_ref().filter(|p| p.remote) else {
        return;
    };
    if p.sent.borrow().is_none() && p.ticket.is_done() {
        let Some(bytes) = p.ticket.take_payload() else {
            // Not this part's lead, or its own write failed (its ticket says why).
            p.acked.replace(Some(Ok(())));
            p.sent.replace(Some(Future::ready(Ok(()))));
            return;
        };
        let rpcs = ck.rpcs.get().expect("launch registers the checkpoint rpcs");
        let name = dir_name(&p.dir);
        let buddy = ck.buddy.get();
        let f = pgas::runtime_hooks::internal(|| {
            pgas::rpc(buddy, rpcs.copy, (name, rt.rank, Bytes(bytes)))
        });
        p.sent.replace(Some(f));
    }
    let ready = p.sent.borrow().as_ref().is_some_and(|f| f.is_ready());
    if ready && p.acked.borrow().is_none() {
        let f = p
            .sent
            .replace(Some(Future::ready(Ok(()))))
            .expect("sent above");
        p.acked.replace(Some(f.wait()));
    }
}

/// Whether the pending checkpoint `p` is written as far as this rank is concerned: its part
/// durable and, for a part this rank leads in node-local directories, its copy durable at the
/// buddy (the ack received).
pub(crate) fn written(p: &Pending) -> bool {
    p.ticket.is_done() && (!p.remote || p.acked.borrow().is_some())
}

/// The buddy's ack of this rank's copy: `Err` names why the copy is not durable.
pub(crate) fn ack(p: &Pending) -> Acked {
    p.acked.borrow().clone().unwrap_or(Ok(()))
}

/// The checkpoint directory's own name (the part of its path every process shares).
fn dir_name(dir: &std::path::Path) -> String {
    dir.file_name()
        .and_then(|n| n.to_str())
        .expect("a checkpoint directory is named by checkpoint_dir")
        .to_string()
}

/// Restart: the bytes of the copy of the part `part` leads, kept by rank `buddy` in the
/// checkpoint `name` of its own directory (an rpc to the buddy, which reads its file).
pub(crate) fn fetch(
    rt: &CdRuntime,
    name: &str,
    part: usize,
    buddy: usize,
) -> Result<Vec<u8>, String> {
    let rpcs = rt
        .checkpoint
        .rpcs
        .get()
        .expect("launch registers the checkpoint rpcs");
    pgas::runtime_hooks::internal(|| pgas::rpc(buddy, rpcs.fetch, (name.to_string(), part)).wait())
        .map(|b| b.0)
        .map_err(|why| format!("the copy at rank {buddy}: {why}"))
}
