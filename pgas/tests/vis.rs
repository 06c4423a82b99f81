//! Non-contiguous transfers (UPC++ VIS): strided blocks of 1-3 dimensions with unit and
//! non-unit strides on both sides and zero extents, irregular and regular vectors of many
//! pieces, for element types of several sizes, into a neighbour and into self, each checked
//! against a local reference copy of the target memory; their input validation; what the
//! hook sees of them; and that each travels as one message per target.

mod common;

use std::cell::RefCell;
use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

use common::{allgather, mix, ranks, run};
use gasnet_bridge::WriteAck;
use pgas::bytemuck::{self, Pod};
use pgas::runtime_hooks::{Interceptor, OpId, Rma, clear_hook, set_hook};
use pgas::{
    GlobalPtr, RpcTable, barrier, delete_, new_array, rank_me, rget_irregular, rget_regular,
    rget_slice, rget_strided, rput_irregular, rput_regular, rput_slice, rput_strided,
};

/// Elements of each rank's target array.
const LEN: usize = 4096;

/// A deterministic stream of choices.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 = mix(self.0);
        (self.0 % n as u64) as usize
    }
}

/// `len` elements of `T` made of deterministic bytes.
fn values<T: Pod>(seed: u64, len: usize) -> Vec<T> {
    let bytes = common::pattern(seed, len * size_of::<T>());
    let mut out = vec![T::zeroed(); len];
    bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes[..len * size_of::<T>()]);
    out
}

/// The bytes of `v` (elements are compared as bytes: random floats may be NaN).
fn raw<T: Pod>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// Element offset of the last element of a block (extents all non-zero).
fn last<const N: usize>(strides: &[usize; N], extents: &[usize; N]) -> usize {
    strides.iter().zip(extents).map(|(s, e)| s * (e - 1)).sum()
}

/// Calls `f(offset)` for every element of the block, in order (dimension 0 fastest).
fn each_element<const N: usize>(
    strides: &[usize; N],
    extents: &[usize; N],
    mut f: impl FnMut(usize),
) {
    let count: usize = extents.iter().product();
    for k in 0..count {
        let (mut rest, mut at) = (k, 0);
        for d in 0..N {
            at += (rest % extents[d]) * strides[d];
            rest /= extents[d];
        }
        f(at);
    }
}

/// Strides of a random block layout: dimension 0 unit or not, the others wide enough that
/// the layout never maps two elements to one place.
fn layout<const N: usize>(dice: &mut Dice, extents: &[usize; N]) -> [usize; N] {
    let mut strides = [0; N];
    let mut reach = 1;
    for d in 0..N {
        let pad = if d == 0 { dice.below(3) } else { dice.below(2) };
        strides[d] = reach * (1 + pad);
        reach = strides[d] * extents[d].max(1);
    }
    strides
}

/// One random strided case: puts a block from a random local layout into `target` (a
/// `LEN`-element array whose contents `model` mirrors), reads it back into another random
/// layout, and checks both against the reference.
fn strided_case<T: Pod + Debug, const N: usize>(
    dice: &mut Dice,
    target: GlobalPtr<T>,
    model: &mut [T],
) {
    let mut extents = [0; N];
    for e in &mut extents {
        // A zero extent now and then: the transfer then moves nothing.
        *e = if dice.below(12) == 0 {
            0
        } else {
            1 + dice.below(6)
        };
    }
    let src_strides = layout(dice, &extents);
    let dst_strides = layout(dice, &extents);
    let back_strides = layout(dice, &extents);
    if extents.contains(&0) {
        let before = rget_slice(target, LEN).wait();
        rput_strided(&[] as &[T], src_strides, target, dst_strides, extents).wait();
        let mut none: Vec<T> = Vec::new();
        rget_strided(target, dst_strides, &mut none, back_strides, extents).wait();
        assert!(
            raw(&rget_slice(target, LEN).wait()) == raw(&before),
            "zero extent {extents:?}"
        );
        return;
    }
    let dst_last = last(&dst_strides, &extents);
    let base = dice.below(LEN - dst_last);
    let src: Vec<T> = values(mix(dice.0), last(&src_strides, &extents) + 1);
    rput_strided(&src, src_strides, target + base, dst_strides, extents).wait();
    let mut from = Vec::new();
    each_element(&src_strides, &extents, |at| from.push(src[at]));
    let mut k = 0;
    each_element(&dst_strides, &extents, |at| {
        model[base + at] = from[k];
        k += 1;
    });
    assert!(
        raw(&rget_slice(target, LEN).wait()) == raw(model),
        "after rput_strided {extents:?} {src_strides:?} -> {dst_strides:?} at {base}"
    );
    let mut back = vec![T::zeroed(); last(&back_strides, &extents) + 1];
    rget_strided(target + base, dst_strides, &mut back, back_strides, extents).wait();
    let mut k = 0;
    each_element(&back_strides, &extents, |at| {
        assert!(
            raw(&back[at..=at]) == raw(&from[k..=k]),
            "rget_strided element {k} of {extents:?}"
        );
        k += 1;
    });
}

/// A hook that lets everything through: with one installed, strided transfers take the
/// packed path even where the target's memory is mapped (on smp, the only way to test it).
struct Pass;
impl Interceptor for Pass {}

/// Runs strided cases of 1, 2 and 3 dimensions for `T` into the right neighbour and into self,
/// with and without a hook.
fn strided_cases<T: Pod + Debug>(n: usize, salt: u64) {
    strided_cases_hooked::<T>(n, salt, false);
    strided_cases_hooked::<T>(n, salt, true);
}

fn strided_cases_hooked<T: Pod + Debug>(n: usize, salt: u64, hooked: bool) {
    run(n, 4, RpcTable::new(), move || {
        if hooked {
            set_hook(Rc::new(Pass));
        }
        let me = rank_me();
        let nb = new_array::<T>(LEN).unwrap();
        let own = new_array::<T>(LEN).unwrap();
        let arrays = allgather(nb);
        barrier();
        // Only this rank writes its right neighbour's `nb` and its own `own`.
        let targets = [arrays[(me + 1) % n], own];
        for (i, &target) in targets.iter().enumerate() {
            let mut model = rget_slice(target, LEN).wait();
            let mut dice = Dice(salt ^ (me as u64) << 20 ^ (i as u64) << 40);
            for _ in 0..12 {
                strided_case::<T, 1>(&mut dice, target, &mut model);
                strided_case::<T, 2>(&mut dice, target, &mut model);
                strided_case::<T, 3>(&mut dice, target, &mut model);
            }
        }
        barrier();
        delete_(nb).unwrap();
        delete_(own).unwrap();
    });
}

#[test]
fn strided_blocks_of_every_shape_match_a_reference_copy() {
    for n in ranks() {
        strided_cases::<u8>(n, 1);
        strided_cases::<u16>(n, 2);
        strided_cases::<[u8; 3]>(n, 3);
        strided_cases::<f64>(n, 4);
        strided_cases::<[u64; 3]>(n, 5);
    }
}

/// Random pieces covering distinct ranges of `0..LEN`, in random order: `count` pieces of
/// `len` elements if `len` is given, else of random lengths (some empty).
fn pieces(dice: &mut Dice, count: usize, len: Option<usize>) -> Vec<(usize, usize)> {
    let slot = LEN / count;
    let mut out: Vec<(usize, usize)> = (0..count)
        .map(|i| {
            let l = len.unwrap_or_else(|| dice.below(slot.min(9)));
            (i * slot + dice.below(slot - l + 1), l)
        })
        .collect();
    for i in (1..out.len()).rev() {
        out.swap(i, dice.below(i + 1));
    }
    out
}

/// Splits `total` elements into local pieces with boundaries unrelated to the remote ones.
fn split(dice: &mut Dice, total: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut left = total;
    while left > 0 {
        let l = (1 + dice.below(13)).min(left);
        out.push(l);
        left -= l;
    }
    out
}

fn vector_cases<T: Pod + Debug>(n: usize, salt: u64) {
    run(n, 4, RpcTable::new(), move || {
        let me = rank_me();
        let nb = new_array::<T>(LEN).unwrap();
        let own = new_array::<T>(LEN).unwrap();
        let arrays = allgather(nb);
        barrier();
        for (i, &target) in [arrays[(me + 1) % n], own].iter().enumerate() {
            let mut model = rget_slice(target, LEN).wait();
            let mut dice = Dice(salt ^ (me as u64) << 20 ^ (i as u64) << 40);
            for round in 0..6 {
                // Irregular: hundreds of remote pieces, local pieces cut elsewhere.
                let remote = pieces(&mut dice, 300 + round * 50, None);
                let total: usize = remote.iter().map(|p| p.1).sum();
                let data: Vec<T> = values(mix(dice.0), total);
                let cuts = split(&mut dice, total);
                let mut local: Vec<&[T]> = Vec::new();
                let mut at = 0;
                for &c in &cuts {
                    local.push(&data[at..at + c]);
                    at += c;
                }
                let dst: Vec<(GlobalPtr<T>, usize)> =
                    remote.iter().map(|&(o, l)| (target + o, l)).collect();
                rput_irregular(&local, &dst).wait();
                let mut k = 0;
                for &(o, l) in &remote {
                    model[o..o + l].copy_from_slice(&data[k..k + l]);
                    k += l;
                }
                assert!(
                    raw(&rget_slice(target, LEN).wait()) == raw(&model),
                    "rput_irregular {round}"
                );
                let mut back = vec![T::zeroed(); total];
                {
                    let mut parts: Vec<&mut [T]> = Vec::new();
                    let mut rest: &mut [T] = &mut back;
                    for &c in &cuts {
                        let (head, tail) = rest.split_at_mut(c);
                        parts.push(head);
                        rest = tail;
                    }
                    rget_irregular(&dst, &mut parts).wait();
                }
                assert!(raw(&back) == raw(&data), "rget_irregular {round}");

                // Regular: equal pieces of 1 + round elements on both sides of different count.
                let l = 1 + round;
                let remote = pieces(&mut dice, 200, Some(l));
                let total = 200 * l;
                let data: Vec<T> = values(mix(dice.0), total);
                let local: Vec<&[T]> = data.chunks(2 * l).collect();
                let dst: Vec<GlobalPtr<T>> = remote.iter().map(|&(o, _)| target + o).collect();
                rput_regular(&local, &dst, l).wait();
                for (j, &(o, _)) in remote.iter().enumerate() {
                    model[o..o + l].copy_from_slice(&data[j * l..(j + 1) * l]);
                }
                assert!(
                    raw(&rget_slice(target, LEN).wait()) == raw(&model),
                    "rput_regular {round}"
                );
                let mut back = vec![T::zeroed(); total];
                rget_regular(&dst, l, &mut back.chunks_mut(4 * l).collect::<Vec<_>>()).wait();
                assert!(raw(&back) == raw(&data), "rget_regular {round}");
            }
        }
        barrier();
        delete_(nb).unwrap();
        delete_(own).unwrap();
    });
}

#[test]
fn irregular_and_regular_vectors_of_many_pieces_match_a_reference_copy() {
    for n in ranks() {
        vector_cases::<u8>(n, 11);
        vector_cases::<u32>(n, 12);
        vector_cases::<[u16; 5]>(n, 13);
        vector_cases::<f64>(n, 14);
    }
}

/// The panic message of `f`.
fn panic_of(f: impl FnOnce()) -> String {
    let e = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn bad_vectors_panic_naming_the_cause_and_write_nothing() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let a = new_array::<u64>(64).unwrap();
            let arrays = allgather(a);
            barrier();
            let right = arrays[(me + 1) % n];
            let before = rget_slice(right, 64).wait();
            let m = panic_of(|| {
                rput_irregular(&[&[1u64, 2][..], &[3]], &[(right, 2), (right + 4, 2)]).wait();
            });
            assert!(m.contains("3 elements") && m.contains("4"), "{m}");
            let m = panic_of(|| {
                rput_regular(&[&[1u64, 2][..], &[3]], &[right, right + 4], 2).wait();
            });
            assert!(m.contains("one size"), "{m}");
            let m = panic_of(|| {
                let mut d = [0u64; 3];
                let (x, y) = d.split_at_mut(1);
                rget_regular(&[right], 3, &mut [x, y]).wait();
            });
            assert!(m.contains("one size"), "{m}");
            let m = panic_of(|| {
                rput_irregular(&[&[1u64, 2][..]], &[(right, 1), (GlobalPtr::null(), 1)]).wait();
            });
            assert!(m.contains("null"), "{m}");
            if n > 1 {
                let other = arrays[(me + 2) % n];
                if other.rank() != right.rank() {
                    let m = panic_of(|| {
                        rput_irregular(&[&[1u64, 2][..]], &[(right, 1), (other, 1)]).wait();
                    });
                    assert!(m.contains("one rank"), "{m}");
                }
            }
            // The first piece is valid, the second overruns the segment: nothing is written.
            let segment = pgas::testing::bench_endpoint(|ep| ep.segment_len());
            let far = GlobalPtr::<u64>::from_raw(right.rank(), segment);
            let m = panic_of(|| {
                rput_irregular(&[&[7u64, 8, 9][..]], &[(right, 1), (far - 1, 2)]).wait();
            });
            assert!(m.contains("outside the segment"), "{m}");
            let m = panic_of(|| {
                let mut d = [0u64; 4];
                rget_strided(far - 3, [2], &mut d, [1], [4]).wait();
            });
            assert!(m.contains("outside the segment"), "{m}");
            let m = panic_of(|| {
                rput_strided(&[1u64; 6], [2], right, [1], [4]).wait();
            });
            assert!(m.contains("element 6 of a 6-element source"), "{m}");
            assert_eq!(rget_slice(right, 64).wait(), before);
            barrier();
            delete_(a).unwrap();
        });
    }
}

/// Records every put (with its ack) and get the hook sees.
#[derive(Default)]
struct Log {
    puts: RefCell<Vec<(OpId, Rma, Vec<u8>)>>,
    acks: RefCell<Vec<(OpId, Rma, WriteAck)>>,
    gets: RefCell<Vec<(OpId, Rma, Vec<u8>)>>,
}

impl Interceptor for Log {
    fn before_put(&self, id: OpId, rma: &Rma, bytes: &[u8]) -> pgas::runtime_hooks::PutAction {
        self.puts.borrow_mut().push((id, *rma, bytes.to_vec()));
        pgas::runtime_hooks::PutAction::Proceed
    }
    fn after_put(&self, id: OpId, rma: &Rma, ack: WriteAck) {
        self.acks.borrow_mut().push((id, *rma, ack));
    }
    fn after_get(&self, id: OpId, rma: &Rma, data: &[u8]) {
        self.gets.borrow_mut().push((id, *rma, data.to_vec()));
    }
}

#[test]
fn the_hook_sees_every_piece_and_iwc_values_have_no_gap() {
    for n in ranks() {
        // A job that counts incoming writes, as a resilience runtime launches.
        common::run_counting(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let a = new_array::<u32>(LEN).unwrap();
            let arrays = allgather(a);
            let log = Rc::new(Log::default());
            barrier();
            let iwc0 = pgas::runtime_hooks::incoming_writes();
            barrier();
            set_hook(log.clone());
            // Every rank writes a disjoint column set of every rank's array, mixing plain,
            // strided and vector puts, all at once.
            let mut count = 0;
            for (t, &arr) in arrays.iter().enumerate() {
                let col = me * 8;
                let data: Vec<u32> = (0..64).map(|k| (me * 1000 + t * 100 + k) as u32).collect();
                rput_strided(&data, [1, 4], arr + col, [1, 8 * n], [4, 16]).wait();
                count += 16;
                rput_slice(&data[..3], arr + col + 4).wait();
                count += 1;
                let dst: Vec<(GlobalPtr<u32>, usize)> = (0..10)
                    .map(|r| (arr + 4096 - 8 * n * (r + 1) + col, 2))
                    .collect();
                rput_irregular(&[&data[..20]], &dst).wait();
                count += 10;
                let mut back = vec![0u32; 64];
                rget_strided(arr + col, [1, 8 * n], &mut back, [1, 4], [4, 16]).wait();
                assert_eq!(back, data);
            }
            clear_hook();
            let puts = log.puts.borrow().clone();
            let acks = log.acks.borrow().clone();
            assert_eq!(puts.len(), count);
            assert_eq!(acks.len(), count, "one ack per piece");
            // Same ids and ranges, in order; each piece's bytes are what landed there.
            for (p, a) in puts.iter().zip(&acks) {
                assert_eq!((p.0, p.1), (a.0, a.1));
            }
            let first = &puts[0];
            assert_eq!(first.1.len, 16, "a 4-element u32 run");
            assert_eq!(
                log.gets.borrow().len(),
                16 * n,
                "each run of each strided get"
            );
            // Per target, the pieces of one vector got consecutive IWC values.
            let mine: Vec<(usize, u64)> = acks.iter().map(|a| (a.1.rank, a.2.iwc)).collect();
            for w in acks.windows(2).take(15) {
                assert_eq!(
                    w[1].2.iwc,
                    w[0].2.iwc + 1,
                    "strided pieces counted in order"
                );
            }
            barrier();
            let iwc_now = pgas::runtime_hooks::incoming_writes();
            // All logs together: every rank's IWC values are exactly iwc0+1..=iwc_now.
            let all = pgas::reduce_all(mine, common::concat).wait();
            let mut got: Vec<u64> = all.iter().filter(|w| w.0 == me).map(|w| w.1).collect();
            got.sort_unstable();
            assert_eq!(got, (iwc0 + 1..=iwc_now).collect::<Vec<_>>(), "rank {me}");
            assert_eq!(got.len(), 27 * n, "rank {me}");
            barrier();
            delete_(a).unwrap();
        });
    }
}

/// Messages this rank has sent, and whether `rank`'s memory is copied directly from here.
fn sent() -> u64 {
    pgas::testing::bench_endpoint(|ep| ep.messages_sent())
}

fn direct(rank: usize) -> bool {
    pgas::testing::bench_endpoint(|ep| ep.segment_base(rank).is_ok())
}

#[test]
fn a_non_contiguous_transfer_is_one_message_per_target() {
    for n in ranks().into_iter().filter(|&n| n > 1) {
        run(n, 4, RpcTable::new(), move || {
            let a = new_array::<f64>(64 * 128).unwrap();
            let arrays = allgather(a);
            barrier();
            if rank_me() == 0 {
                let t = arrays[1];
                let src: Vec<f64> = (0..64 * 64).map(|k| k as f64).collect();
                // 64 x 64 block, every other element of 128-element rows: 4096 runs.
                let block = ([1, 64], t, [2, 128], [64, 64]);
                // Messages per transfer: none when the target is addressable or reached through
                // the MPI-3 window (one MPI call with the pieces as its datatype), else one.
                let by_messages = pgas::testing::bench_endpoint(|ep| ep.rma_by_messages(1));
                let expect = if direct(1) || !by_messages { 0 } else { 1 };
                let s0 = sent();
                rput_strided(&src, block.0, block.1, block.2, block.3).wait();
                let s1 = sent();
                assert_eq!(s1 - s0, expect, "rput_strided");
                let mut back = vec![0.0; 64 * 64];
                rget_strided(t, [2, 128], &mut back, [1, 64], [64, 64]).wait();
                assert_eq!(sent() - s1, expect, "rget_strided");
                assert_eq!(back, src);
                let s2 = sent();
                let dst: Vec<(GlobalPtr<f64>, usize)> = (0..500).map(|k| (t + 3 * k, 1)).collect();
                rput_irregular(&[&src[..500]], &dst).wait();
                let dst: Vec<GlobalPtr<f64>> = (0..500).map(|k| t + 3 * k).collect();
                let mut back = vec![0.0; 500];
                rget_regular(&dst, 1, &mut [&mut back[..]]).wait();
                assert_eq!(back, src[..500]);
                assert_eq!(sent() - s2, 2 * expect, "irregular put, regular get");
                // The counter does count messages: run by run it is one per run (unless the
                // runs travel as MPI-3 window puts, which are no messages).
                let s3 = sent();
                pgas::testing::rput_strided_run_by_run(&src, [1, 64], t, [2, 128], [64, 64]);
                let per_run = if by_messages { 1 } else { 0 };
                assert_eq!(sent() - s3, 4096 * per_run, "run by run");
            }
            barrier();
            delete_(a).unwrap();
        });
    }
}
