//! Random puts and gets from every rank, every result checked against a model.
//!
//! Each target segment is cut into one slice per rank; in a *write phase* rank `o` is the only
//! writer (and reader) of slice `o` of every segment, so it knows exactly what a get of its
//! slice must return, and it mirrors each write into a shared model. After a barrier comes a
//! *read phase* in which nobody writes and every rank gets random ranges of any segment,
//! spanning several owners' slices, and compares them with the model.

mod common;

use std::sync::RwLock;
use std::time::Duration;

use gasnet_bridge::{Endpoint, HandlerTable};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

const SLICE: usize = 128 << 10;
const MAX_XFER: usize = 64 << 10;

/// A size from 1 B to 64 KiB, spread evenly over the powers of two.
fn random_size(rng: &mut SmallRng) -> usize {
    let bits = rng.random_range(0..=16u32);
    let lo = 1usize << bits.saturating_sub(1);
    let hi = (1usize << bits).min(MAX_XFER);
    rng.random_range(lo..=hi)
}

/// The model: `slices[target * n + owner]` mirrors slice `owner` of `target`'s segment.
struct Model {
    n: usize,
    slices: Vec<RwLock<Vec<u8>>>,
}

impl Model {
    fn new(n: usize) -> Self {
        Model {
            n,
            slices: (0..n * n).map(|_| RwLock::new(vec![0; SLICE])).collect(),
        }
    }

    fn write(&self, target: usize, owner: usize, off: usize, data: &[u8]) {
        let mut s = self.slices[target * self.n + owner].write().unwrap();
        s[off..off + data.len()].copy_from_slice(data);
    }

    /// Expected bytes at absolute `offset` of `target`'s segment (may span owners).
    fn expected(&self, target: usize, offset: usize, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut pos = offset;
        while pos < offset + len {
            let owner = pos / SLICE;
            let within = pos % SLICE;
            let take = (SLICE - within).min(offset + len - pos);
            let s = self.slices[target * self.n + owner].read().unwrap();
            out.extend_from_slice(&s[within..within + take]);
            pos += take;
        }
        out
    }
}

fn check(ep: &Endpoint, got: &[u8], want: &[u8], what: &str, target: usize, offset: usize) {
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
        panic!(
            "rank {}: {what} of {} bytes from rank {target} at offset {offset} differs from the \
             model at byte {first}: got {} want {}",
            ep.rank(),
            got.len(),
            got[first],
            want[first]
        );
    }
}

/// One rank's write phase: random puts (blocking, nb, in an access region) and gets of its own
/// slices, each get checked against what this rank wrote.
fn write_phase(ep: &Endpoint, model: &Model, rng: &mut SmallRng, ops: usize) -> usize {
    let n = ep.ranks();
    let me = ep.rank();
    let mut verified = 0;
    for _ in 0..ops {
        let target = rng.random_range(0..n);
        let len = random_size(rng);
        let off = rng.random_range(0..=SLICE - len);
        let abs = me * SLICE + off;
        match rng.random_range(0..6) {
            0 | 1 => {
                let mut data = vec![0; len];
                rng.fill_bytes(&mut data);
                ep.put(target, abs, &data).unwrap();
                model.write(target, me, off, &data);
            }
            2 => {
                let mut data = vec![0; len];
                rng.fill_bytes(&mut data);
                let sent = data.clone();
                let h = ep.put_nb(target, abs, &data).unwrap();
                let flip = !data[0];
                data.fill(flip); // the source is reusable once put_nb returns
                let ack = h.wait(ep);
                assert!(ack.iwc >= 1);
                model.write(target, me, off, &sent);
                let mut back = vec![0; len];
                ep.get(target, abs, &mut back).unwrap();
                check(ep, &back, &sent, "get after put_nb", target, abs);
                verified += 1;
            }
            3 => {
                let mut got = vec![0; len];
                ep.get(target, abs, &mut got).unwrap();
                check(
                    ep,
                    &got,
                    &model.expected(target, abs, len),
                    "get",
                    target,
                    abs,
                );
                verified += 1;
            }
            4 => {
                let mut got = vec![0; len];
                let h = ep.get_nb(target, abs, &mut got).unwrap();
                h.wait(ep);
                check(
                    ep,
                    &got,
                    &model.expected(target, abs, len),
                    "get_nb",
                    target,
                    abs,
                );
                verified += 1;
            }
            _ => {
                // An access region: a put then a get of the same range, completed together.
                let mut data = vec![0; len];
                rng.fill_bytes(&mut data);
                let mut back = vec![0; len];
                {
                    let mut region = ep.access_region();
                    region.put(target, abs, &data).unwrap();
                    region.get(target, abs, &mut back).unwrap();
                    assert_eq!(region.issued(), 2);
                    assert_eq!(region.wait_all(), 2);
                }
                model.write(target, me, off, &data);
                check(ep, &back, &data, "region get", target, abs);
                verified += 1;
            }
        }
    }
    verified
}

/// Gets of random ranges anywhere (nobody writes now), checked against the model.
fn read_phase(ep: &Endpoint, model: &Model, rng: &mut SmallRng, ops: usize) -> usize {
    let n = ep.ranks();
    for _ in 0..ops {
        let target = rng.random_range(0..n);
        let len = random_size(rng);
        let abs = rng.random_range(0..=n * SLICE - len);
        let mut got = vec![0; len];
        ep.get(target, abs, &mut got).unwrap();
        check(
            ep,
            &got,
            &model.expected(target, abs, len),
            "read-phase get",
            target,
            abs,
        );
    }
    ops
}

fn stress(n: usize, phases: usize, ops: usize, seed: u64) {
    let model = Model::new(n);
    let verified = common::within(Duration::from_secs(60), "rma stress", || {
        gasnet_bridge::launch(&common::config(n, n * SLICE), HandlerTable::new(), |ep| {
            let mut rng = SmallRng::seed_from_u64(seed ^ (ep.rank() as u64) << 32);
            let mut verified = 0;
            for _ in 0..phases {
                verified += write_phase(ep, &model, &mut rng, ops);
                ep.barrier().unwrap();
                verified += read_phase(ep, &model, &mut rng, ops / 2);
                ep.barrier().unwrap();
            }
            // Finally every rank checks its whole segment, byte for byte.
            let mut all = vec![0; n * SLICE];
            ep.get(ep.rank(), 0, &mut all).unwrap();
            check(
                ep,
                &all,
                &model.expected(ep.rank(), 0, n * SLICE),
                "full",
                ep.rank(),
                0,
            );
            verified + 1
        })
        .unwrap()
    });
    // Every rank did its share of verified reads (no rank skipped its loop).
    assert_eq!(verified.len(), n);
    assert!(
        verified.iter().all(|&v| v > phases * ops / 2),
        "{verified:?}"
    );
    // Something was actually written: the model is not all zeros in any rank's segment.
    for target in 0..n {
        let bytes = model.expected(target, 0, n * SLICE);
        assert!(
            bytes.iter().any(|&b| b != 0),
            "nothing landed in rank {target}"
        );
    }
}

#[test]
fn rma_stress_2_ranks() {
    stress(2, 6, 1500, 0xA11CE);
}

#[test]
fn rma_stress_3_ranks() {
    stress(3, 6, 1000, 0xB0B);
}

#[test]
fn rma_stress_4_ranks() {
    stress(4, 5, 800, 0xC0FFEE);
}

#[test]
fn rma_stress_8_ranks() {
    stress(8, 4, 400, 0xD00D);
}

#[test]
fn rma_stress_16_ranks() {
    stress(16, 4, 200, 0xFEED);
}
