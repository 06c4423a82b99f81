//! Bit-for-bit agreement with the LLNL reference (serial build, and the
//! OpenMP build for the threaded gather mode).

use lulesh::{FinalReport, Options, Simulation};

fn run(nx: i32, its: i32, threads: usize) -> (Simulation, FinalReport) {
    let opts = Options {
        nx,
        its,
        threads,
        ..Options::default()
    };
    let mut sim = Simulation::single_rank(&opts).expect("setup");
    let elapsed = sim.run(opts.its, |_| {}).expect("run");
    let report = FinalReport::new(&sim.domain, elapsed, nx, 1);
    (sim, report)
}

fn hex(x: f64) -> String {
    lulesh::verify::fmt_e(x, 17)
}

#[test]
fn serial_s10_matches_reference_bit_for_bit() {
    let (sim, r) = run(10, 9_999_999, 1);
    assert_eq!(r.cycles, 231);
    assert_eq!(hex(r.origin_energy), "2.72053116847034689e+04");
    assert_eq!(hex(r.energy_sum), "2.41746210522627283e+05");
    assert_eq!(hex(sim.domain.ts.deltatime), "3.74456628753107312e-05");
    let text = r.render();
    for line in [
        "Run completed:\n",
        "   Problem size        =  10\n",
        "   MPI tasks           =  1\n",
        "   Iteration count     =  231\n",
        "   Final Origin Energy =  2.720531e+04\n",
        "   Testing Plane 0 of Energy Array on rank 0:\n",
        "        MaxAbsDiff   = 2.273737e-12\n",
        "        TotalAbsDiff = 1.659646e-11\n",
        "        MaxRelDiff   = 4.649603e-14\n",
        "   Origin Energy (full)  = 2.72053116847034689e+04\n",
        "   Sum of Energy (full)  = 2.41746210522627283e+05\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn serial_s10_100_cycles_matches_reference() {
    let (sim, r) = run(10, 100, 1);
    assert_eq!(r.cycles, 100);
    assert_eq!(hex(r.origin_energy), "4.89878492971726810e+04");
    assert_eq!(hex(sim.domain.ts.time), "2.71902957464128766e-03");
}

#[test]
fn serial_s20_matches_reference_bit_for_bit() {
    let (sim, r) = run(20, 9_999_999, 1);
    assert_eq!(r.cycles, 575);
    assert_eq!(hex(r.origin_energy), "9.66885598157783534e+04");
    assert_eq!(hex(r.energy_sum), "1.93071440003941045e+06");
    assert_eq!(hex(sim.domain.ts.deltatime), "2.46865415093680540e-05");
    let text = r.render();
    assert!(text.contains("        MaxAbsDiff   = 2.728484e-11\n"));
    assert!(text.contains("        TotalAbsDiff = 2.408315e-10\n"));
    assert!(text.contains("        MaxRelDiff   = 1.797959e-12\n"));
}

#[test]
fn threaded_gather_s10_matches_openmp_reference_for_2_and_3_threads() {
    for threads in [2, 3] {
        let (_, r) = run(10, 9_999_999, threads);
        assert_eq!(r.cycles, 231, "threads {threads}");
        assert_eq!(
            hex(r.origin_energy),
            "2.72053116847034617e+04",
            "threads {threads}"
        );
        assert_eq!(
            hex(r.energy_sum),
            "2.41746210522627720e+05",
            "threads {threads}"
        );
        let text = r.render();
        assert!(
            text.contains("        MaxAbsDiff   = 1.591616e-12\n"),
            "{text}"
        );
        assert!(
            text.contains("        TotalAbsDiff = 1.948782e-11\n"),
            "{text}"
        );
        assert!(
            text.contains("        MaxRelDiff   = 1.566182e-14\n"),
            "{text}"
        );
    }
}

#[test]
fn regions_and_cost_change_work_but_not_the_answer() {
    let base = run(10, 40, 1).1;
    for (num_reg, balance, cost) in [(1, 1, 1), (5, 3, 0), (21, 0, 4)] {
        let opts = Options {
            nx: 10,
            its: 40,
            num_reg,
            balance,
            cost,
            ..Options::default()
        };
        let mut sim = Simulation::single_rank(&opts).unwrap();
        sim.run(opts.its, |_| {}).unwrap();
        let r = FinalReport::new(&sim.domain, 0.0, 10, 1);
        assert_eq!(r.origin_energy.to_bits(), base.origin_energy.to_bits());
        assert_eq!(r.energy_sum.to_bits(), base.energy_sum.to_bits());
    }
}
