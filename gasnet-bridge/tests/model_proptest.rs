//! Random sequences of puts, gets, long AMs and atomics on one segment, checked step by step
//! against a sequential model (bytes, previous values, errors and IWC values).

mod common;

use gasnet_bridge::{AtomicOp, BridgeError, HandlerTable};
use proptest::prelude::*;

const SEG: usize = 512;

#[derive(Debug, Clone)]
enum Op {
    Put { off: usize, data: Vec<u8> },
    Get { off: usize, len: usize },
    Long { off: usize, data: Vec<u8> },
    Atomic { off: usize, op: AtomicOp },
}

fn offset() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 0..SEG, 1 => SEG - 8..SEG + 16, 1 => Just(usize::MAX - 2)]
}

fn atomic_op() -> impl Strategy<Value = AtomicOp> {
    prop_oneof![
        Just(AtomicOp::Load),
        any::<u64>().prop_map(AtomicOp::FetchAdd),
        any::<u64>().prop_map(AtomicOp::Swap),
        (0..3u64, any::<u64>())
            .prop_map(|(current, new)| AtomicOp::CompareExchange { current, new }),
        any::<u64>().prop_map(AtomicOp::Min),
        any::<i64>().prop_map(AtomicOp::MaxI64),
        any::<u64>().prop_map(AtomicOp::Xor),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (offset(), prop::collection::vec(any::<u8>(), 0..80))
            .prop_map(|(off, data)| Op::Put { off, data }),
        (offset(), 0..80usize).prop_map(|(off, len)| Op::Get { off, len }),
        (offset(), prop::collection::vec(any::<u8>(), 0..80))
            .prop_map(|(off, data)| Op::Long { off, data }),
        (
            prop_oneof![4 => (0..SEG / 8).prop_map(|w| w * 8), 1 => 0..SEG + 8],
            atomic_op()
        )
            .prop_map(|(off, op)| Op::Atomic { off, op }),
    ]
}

/// The sequential model of rank 1's segment and IWC.
struct Model {
    bytes: Vec<u8>,
    iwc: u64,
}

impl Model {
    fn range(&self, off: usize, len: usize) -> Result<(), BridgeError> {
        match off.checked_add(len) {
            Some(end) if end <= SEG => Ok(()),
            _ => Err(BridgeError::OutOfSegment {
                rank: 1,
                offset: off,
                len,
                segment_len: SEG,
            }),
        }
    }

    fn word(&self, off: usize) -> u64 {
        u64::from_ne_bytes(self.bytes[off..off + 8].try_into().unwrap())
    }

    /// (previous value, whether it writes) of an atomic, applied to the model.
    fn atomic(&mut self, off: usize, op: AtomicOp) -> Result<(u64, bool), BridgeError> {
        self.range(off, 8)?;
        if !off.is_multiple_of(8) {
            return Err(BridgeError::Misaligned {
                rank: 1,
                offset: off,
                align: 8,
            });
        }
        let old = self.word(off);
        let new = match op {
            AtomicOp::Load => None,
            AtomicOp::FetchAdd(v) => Some(old.wrapping_add(v)),
            AtomicOp::Swap(v) => Some(v),
            AtomicOp::CompareExchange { current, new } => (old == current).then_some(new),
            AtomicOp::Min(v) => Some(old.min(v)),
            AtomicOp::MaxI64(v) => Some((old as i64).max(v) as u64),
            AtomicOp::Xor(v) => Some(old ^ v),
            other => unreachable!("not generated: {other:?}"),
        };
        if let Some(w) = new {
            self.bytes[off..off + 8].copy_from_slice(&w.to_ne_bytes());
            self.iwc += 1;
        }
        Ok((old, new.is_some()))
    }
}

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut t = HandlerTable::new();
    let long = t.register("long", |_| {});
    let out = gasnet_bridge::launch(&common::config(2, SEG), t, |ep| {
        if ep.rank() != 0 {
            ep.barrier().unwrap();
            return Ok(ep.incoming_writes());
        }
        // Run the steps, then meet rank 1 at the barrier whatever the outcome.
        let result = (|| {
            let mut m = Model {
                bytes: vec![0; SEG],
                iwc: 0,
            };
            for (step, op) in ops.iter().enumerate() {
                match op {
                    Op::Put { off, data } | Op::Long { off, data } => {
                        let got = if matches!(op, Op::Put { .. }) {
                            ep.put(1, *off, data)
                        } else {
                            ep.am_request_long(1, long, &[], data, *off)
                                .map(|h| h.wait(ep))
                        };
                        let want = m.range(*off, data.len());
                        match (got, want) {
                            (Ok(ack), Ok(())) => {
                                m.bytes[*off..*off + data.len()].copy_from_slice(data);
                                m.iwc += 1;
                                prop_assert_eq!(ack.iwc, m.iwc, "step {}", step);
                            }
                            (got, want) => prop_assert_eq!(got.map(|_| ()), want, "step {}", step),
                        }
                    }
                    Op::Get { off, len } => {
                        let mut buf = vec![0xA5; *len];
                        let got = ep.get(1, *off, &mut buf);
                        let want = m.range(*off, *len);
                        prop_assert_eq!(&got, &want, "step {}", step);
                        if got.is_ok() {
                            prop_assert_eq!(&buf[..], &m.bytes[*off..*off + len], "step {}", step);
                        }
                    }
                    Op::Atomic { off, op } => {
                        let got = ep.atomic(1, *off, *op);
                        match (got, m.atomic(*off, *op)) {
                            (Ok(r), Ok((prev, wrote))) => {
                                prop_assert_eq!(r.previous, prev, "step {} {:?}", step, op);
                                prop_assert_eq!(r.ack.map(|a| a.iwc), wrote.then_some(m.iwc));
                            }
                            (got, want) => {
                                prop_assert_eq!(got.map(|_| ()), want.map(|_| ()), "step {}", step)
                            }
                        }
                    }
                }
            }
            let mut all = vec![0; SEG];
            ep.get(1, 0, &mut all).unwrap();
            prop_assert_eq!(all, m.bytes);
            Ok(m.iwc)
        })();
        ep.barrier().unwrap();
        result
    })
    .unwrap();
    let model_iwc = out[0].clone()?;
    let real_iwc = out[1].clone()?;
    prop_assert_eq!(model_iwc, real_iwc, "rank 1's IWC equals the model's count");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_match_a_sequential_model(ops in prop::collection::vec(op(), 1..120)) {
        check(ops)?;
    }
}
