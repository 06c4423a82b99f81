//! Epochs and counters: the incoming writes a recovering CD gathered, sorted by (EC, IWC) and
//! applied at the start of each epoch as the re-executed body's synchronizations advance the
//! EC; and the check that they are exactly the writes that landed (no gap, no repeat).

use pgas::GlobalPtr;

use crate::relaxed::incoming_rpc;
use crate::relaxed::state::incoming::{Incoming, IncomingWhat};
use crate::runtime::CdRuntime;

/// Applies one incoming write to this rank's memory as a local store (not counted by the
/// IWC: the write was counted when it first landed); an rpc request runs its function again
/// ([`incoming_rpc::rerun`]).
pub fn apply(rt: &CdRuntime, w: &Incoming) -> Result<(), String> {
    let me = rt.rank;
    match &w.what {
        IncomingWhat::Put { offset, bytes } => GlobalPtr::<u8>::from_raw(me, *offset)
            .write_local_slice(&bytes.0)
            .map_err(|e| e.to_string()),
        IncomingWhat::Atomic { offset, op } => {
            let p = GlobalPtr::<u64>::from_raw(me, *offset);
            let old = p.read_local().map_err(|e| e.to_string())?;
            let word = std::sync::atomic::AtomicU64::new(old);
            gasnet_bridge::AtomicOp::from(*op).apply(&word);
            p.write_local(word.into_inner()).map_err(|e| e.to_string())
        }
        IncomingWhat::Rpc { name, args, reply } => {
            incoming_rpc::rerun(rt, w, name, &args.0, reply.as_ref().map(|r| &r.0[..]))
        }
        IncomingWhat::Unlogged { .. } => Err(unlogged(w)),
    }
}

/// Why the unlogged write `w` (from a rank of this rank's SPBC cluster) cannot be applied.
pub fn unlogged(w: &Incoming) -> String {
    format!(
        "the write from rank {} (IWC {}) was made inside this rank's SPBC cluster and not \
         logged: only a re-execution of the whole cluster makes it again",
        w.from, w.iwc
    )
}

/// Checks that the gathered writes and this rank's own writes into itself are exactly the
/// IWC values `iwc_begin + 1 ..= iwc_end`: each once, none missing.
pub fn check_sequence(
    iwc_begin: u64,
    iwc_end: u64,
    gathered: &[Incoming],
    own: &[u64],
) -> Result<(), String> {
    match missing(iwc_begin, iwc_end, gathered, own)?.first() {
        None => Ok(()),
        Some(iwc) => Err(format!(
            "incoming write IWC {iwc} was not found in any initiator's log (written by a rank \
             outside a logging relaxed CD, by the runtime's own traffic, or by a rank whose \
             log went with its memory)"
        )),
    }
}

/// The IWC values of `iwc_begin + 1 ..= iwc_end` that neither the gathered writes nor this
/// rank's own writes into itself account for, in order; an error if one is accounted twice.
pub fn missing(
    iwc_begin: u64,
    iwc_end: u64,
    gathered: &[Incoming],
    own: &[u64],
) -> Result<Vec<u64>, String> {
    let mut seen: Vec<u64> = gathered
        .iter()
        .map(|w| w.iwc)
        .chain(own.iter().copied())
        .filter(|&i| i > iwc_begin && i <= iwc_end)
        .collect();
    seen.sort_unstable();
    if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("incoming write IWC {} is logged twice", w[0]));
    }
    let mut gaps = Vec::new();
    let mut expect = iwc_begin + 1;
    for i in seen.into_iter().chain([iwc_end + 1]) {
        gaps.extend(expect..i);
        expect = i + 1;
    }
    Ok(gaps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buddy::Bytes;
    use crate::relaxed::state::incoming::IncomingQueue;

    fn w(ec: u64, iwc: u64) -> Incoming {
        Incoming {
            from: 0,
            ec,
            iwc,
            what: IncomingWhat::Rpc {
                name: "x".into(),
                args: Bytes(Vec::new()),
                reply: None,
            },
        }
    }

    #[test]
    fn sorted_by_epoch_then_iwc_and_taken_per_epoch() {
        let mut q = IncomingQueue::new(vec![w(7, 14), w(5, 12), w(5, 11), w(7, 13)]);
        assert!(q.take_through(4).is_empty());
        let e5: Vec<u64> = q.take_through(5).iter().map(|i| i.iwc).collect();
        assert_eq!(e5, [11, 12]);
        let e7: Vec<u64> = q.take_through(7).iter().map(|i| i.iwc).collect();
        assert_eq!(e7, [13, 14]);
        assert!(q.is_empty());
    }

    #[test]
    fn gaps_and_repeats_are_errors() {
        assert!(check_sequence(10, 13, &[w(5, 11), w(5, 13)], &[12]).is_ok());
        let e = check_sequence(10, 13, &[w(5, 11), w(5, 13)], &[]).unwrap_err();
        assert!(e.contains("IWC 12"), "{e}");
        let e = check_sequence(10, 12, &[w(5, 11), w(5, 12), w(5, 12)], &[]).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let e = check_sequence(10, 12, &[w(5, 11)], &[]).unwrap_err();
        assert!(e.contains("IWC 12"), "{e}");
        assert!(check_sequence(10, 10, &[], &[]).is_ok());
    }

    #[test]
    fn missing_lists_every_gap_in_order() {
        assert_eq!(
            missing(10, 16, &[w(5, 12), w(5, 15)], &[13]),
            Ok(vec![11, 14, 16])
        );
        assert_eq!(missing(10, 12, &[w(5, 11), w(5, 12)], &[]), Ok(vec![]));
        assert_eq!(missing(10, 12, &[w(5, 9), w(5, 13)], &[]), Ok(vec![11, 12]));
        assert!(missing(10, 12, &[w(5, 11)], &[11]).is_err());
    }
}
