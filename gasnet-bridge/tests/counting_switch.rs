//! The write-counting switch (`WriteCounting::Switched`) under racing writers: the target
//! switches counting on and off many times while every other rank puts into it without
//! pause. What the switch promises (counters.rs): a write that is not counted landed before
//! the switch-on that follows it, so the bytes the target reads right after switching on
//! hold every uncounted write, and each writer's first write not among those bytes is
//! counted, with an IWC above the value the target read; the counted IWCs stay gapless.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gasnet_bridge::{HandlerTable, LaunchConfig, WriteAck, WriteCounting};

/// One switch-on as the target saw it: the IWC it read, and each writer's slot.
#[derive(Debug, Clone)]
struct On {
    iwc: u64,
    slots: Vec<u64>,
}

/// One writer's puts: sequence number and ack.
type Acks = Vec<(u64, WriteAck)>;

fn run(ranks: usize, switches: usize) {
    let writers = ranks - 1;
    // Per writer: the latest sequence number whose put was counted (published for the
    // target, which waits for each writer to make one before switching off again).
    let counted: Arc<Vec<AtomicU64>> = Arc::new((0..ranks).map(|_| AtomicU64::new(0)).collect());
    // Per writer: the latest sequence number whose put was not counted.
    let uncounted: Arc<Vec<AtomicU64>> = Arc::new((0..ranks).map(|_| AtomicU64::new(0)).collect());
    let done = Arc::new(AtomicU64::new(0));
    // Switch-offs so far.
    let phase = Arc::new(AtomicU64::new(0));
    let ons: Arc<Mutex<Vec<On>>> = Arc::default();
    let acks: Arc<Mutex<Vec<Acks>>> = Arc::new(Mutex::new(vec![Vec::new(); ranks]));
    let job = LaunchConfig::new(ranks)
        .segment_bytes(64 * ranks)
        .write_counting(WriteCounting::Switched);
    let (c, d, o, a) = (counted.clone(), done.clone(), ons.clone(), acks.clone());
    let p = phase.clone();
    let u = uncounted.clone();
    common::within(Duration::from_secs(60), "counting switch", || {
        gasnet_bridge::launch(&job, HandlerTable::new(), move |ep| {
            assert_eq!(ep.write_counting(), WriteCounting::Switched);
            let me = ep.rank();
            if me == 0 {
                let mut seen = Vec::new();
                for _ in 0..switches {
                    ep.count_incoming_writes();
                    let iwc = ep.incoming_writes();
                    let slots: Vec<u64> = (0..ranks)
                        .map(|w| {
                            let mut b = [0u8; 8];
                            ep.get(0, 64 * w, &mut b).unwrap();
                            u64::from_ne_bytes(b)
                        })
                        .collect();
                    // Every writer makes a counted put before the switch goes off again, so
                    // its first put after `slots` was made while counting was on.
                    for w in 1..ranks {
                        while c[w].load(Ordering::Acquire) <= slots[w] {
                            // Ranks may outnumber cores: leave the core to the writers.
                            std::thread::yield_now();
                        }
                    }
                    seen.push(On { iwc, slots });
                    ep.stop_counting_incoming_writes();
                    assert!(!ep.counts_incoming_writes());
                    p.fetch_add(1, Ordering::AcqRel);
                    // And an uncounted put from every writer before the next switch-on, so
                    // that writers are putting while it happens.
                    for w in 1..ranks {
                        while u[w].load(Ordering::Acquire) < c[w].load(Ordering::Acquire) {
                            std::thread::yield_now();
                        }
                    }
                }
                d.store(1, Ordering::Release);
                *o.lock().unwrap() = seen;
            } else {
                let mut mine = Vec::new();
                let mut seq = 0u64;
                let mut phase_seen = p.load(Ordering::Acquire);
                while d.load(Ordering::Acquire) == 0 {
                    seq += 1;
                    let ack = ep.put(0, 64 * me, &seq.to_ne_bytes()).unwrap();
                    mine.push((seq, ack));
                    if ack == WriteAck::UNCOUNTED {
                        u[me].store(seq, Ordering::Release);
                    } else {
                        c[me].store(seq, Ordering::Release);
                        // Counted: slow down until the target switches off (so that the
                        // puts, and this record, stay small per switch), but keep putting:
                        // the target may need one that landed after its read.
                        if p.load(Ordering::Acquire) == phase_seen {
                            std::thread::yield_now();
                        }
                    }
                    phase_seen = p.load(Ordering::Acquire);
                }
                a.lock().unwrap()[me] = mine;
            }
            ep.barrier().unwrap();
        })
        .unwrap();
    });
    let ons = ons.lock().unwrap();
    let acks = acks.lock().unwrap();
    assert_eq!(ons.len(), switches);
    let mut iwcs: Vec<u64> = acks
        .iter()
        .flatten()
        .map(|(_, a)| a.iwc)
        .filter(|&i| i > 0)
        .collect();
    iwcs.sort_unstable();
    let n = iwcs.len() as u64;
    assert!(
        n >= (switches * writers) as u64,
        "each switch-on saw a counted put per writer"
    );
    assert_eq!(
        iwcs,
        (1..=n).collect::<Vec<_>>(),
        "counted IWCs are 1..=n, no gap or repeat"
    );
    for (k, on) in ons.iter().enumerate() {
        for w in 1..ranks {
            let first_after = on.slots[w] + 1;
            let (_, ack) = acks[w][first_after as usize - 1];
            assert_eq!(acks[w][first_after as usize - 1].0, first_after);
            assert!(
                ack.iwc > on.iwc,
                "switch-on {k}: writer {w}'s put {first_after} was not among the bytes read \
                 after the switch (slot held {}), yet its ack is {ack:?}, not counted after IWC {}",
                on.slots[w],
                on.iwc
            );
        }
    }
    let uncounted = acks.iter().flatten().filter(|(_, a)| a.iwc == 0).count();
    assert!(
        uncounted >= switches * writers,
        "writers also put while counting was off"
    );
}

#[test]
fn racing_writers_never_slip_past_a_switch_on_3_ranks() {
    run(3, 500);
}

#[test]
fn racing_writers_never_slip_past_a_switch_on_8_ranks() {
    run(8, 40);
}
