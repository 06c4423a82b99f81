//! Privatized regions without shadow memory (relaxed/README.md, "Privatized regions"): a
//! completed relaxed CD that privatized a region and is re-executed in the replay of an
//! enclosing one recomputes the region in place and, when the replay ends, the region gets
//! the final bytes its first execution logged. A rank that reads the region once the
//! owner's relaxed CD has returned (ordered by a synchronization) sees those final bytes,
//! also when the re-execution computes other ones.

mod common;

use cd_runtime as cd;
use common::{config, run};
use pgas::resilience::internal;
use pgas::{barrier, rank_me, rget_slice};

#[test]
fn a_reader_after_the_owners_recovery_sees_the_logged_final_bytes() {
    for diverging in [false, true] {
        let cfg =
            config("[cd.pz]\ninject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n");
        let out = run(2, cfg, move || {
            let me = rank_me();
            let buf = pgas::new_array::<u64>(4).unwrap();
            let bufs = internal(|| pgas::allgather(&pgas::world(), buf).wait());
            let seen = cd::strict("outer", |_| {
                cd::relaxed("pz", |outer| {
                    let salt = if diverging {
                        u64::from(outer.attempt())
                    } else {
                        0
                    };
                    // The inner CD completes (its region logged, usable by others); the
                    // outer one then fails and replays it in place.
                    cd::relaxed("inner", |c| {
                        if me == 1 {
                            c.privatized("out", buf, 4);
                            // Intermediate values, then the final ones; a diverging
                            // re-execution computes others (the logged bytes win).
                            buf.write_local_slice(&[1, 1, 1, 1]).unwrap();
                            let v: Vec<u64> = (0..4).map(|i| 10 + i + 100 * salt).collect();
                            buf.write_local_slice(&v).unwrap();
                        }
                        Ok(())
                    })
                })?;
                // The owner's relaxed CD (and its recovery) returned before this barrier.
                barrier();
                Ok(if me == 0 {
                    rget_slice(bufs[1], 4).wait()
                } else {
                    Vec::new()
                })
            })?;
            let mut mine = vec![0u64; 4];
            buf.read_local_slice(&mut mine).unwrap();
            barrier();
            Ok((seen, mine))
        })
        .unwrap();
        assert_eq!(out.results[0].0, [10, 11, 12, 13], "diverging: {diverging}");
        assert_eq!(out.results[1].1, [10, 11, 12, 13], "diverging: {diverging}");
        let s = out.report.cd("pz").unwrap();
        assert_eq!(
            out.report.cd("inner").unwrap().entries_logged,
            2,
            "the region, twice"
        );
        assert_eq!(s.reexecutions, 1);
        assert_eq!(s.escalations, 0);
    }
}
