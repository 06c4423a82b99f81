//! Agreement: a failure on one rank re-executes exactly the ranks of its CD, together; CDs on
//! other teams are not disturbed.

mod common;

use cd_runtime as cd;
use cd_runtime::CdConfig;
use common::{Ring, config, run, step};

const N: usize = 8;

/// 8 ranks: "all" spans the world, then "half0"/"half1" span world.split(rank / 4), with a
/// child "leaf" of retries 0 inside each half. Returns each rank's vector and how many
/// times it ran the bodies of all, its half, and leaf.
fn program(cfg: CdConfig) -> cd::CdOutcome<(Vec<f64>, [u32; 3])> {
    run(8, cfg, || {
        let ring = Ring::new(N);
        let world = pgas::world();
        let half = world.split((pgas::rank_me() / 4) as u64, 0);
        let half_name = format!("half{}", pgas::rank_me() / 4);
        let mut v: Vec<f64> = (0..N).map(|i| (i + pgas::rank_me()) as f64).collect();
        let mut runs = [0u32; 3];
        cd::strict("all", |c| {
            runs[0] += 1;
            c.preserve("v", &mut v);
            step(&mut v, 1);
            ring.exchange(&world, &mut v);
            Ok(())
        })?;
        cd::strict_on(&half_name, &half, |c| {
            runs[1] += 1;
            c.preserve("v", &mut v);
            step(&mut v, 2);
            // Escalates to the half at once (retries = 0), on this half's ranks only.
            let leaf = cd::strict("leaf", |c| {
                runs[2] += 1;
                c.preserve("v", &mut v);
                step(&mut v, 3);
                Ok(())
            });
            ring.exchange(&half, &mut v);
            leaf
        })?;
        Ok((v, runs))
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn one_failing_rank_reexecutes_exactly_the_ranks_of_its_cd() {
    let clean = program(CdConfig::default());
    let faulty = program(config(
        "[cd.all]\ninject = { at = [{ rank = 3, iteration = 0, kind = \"soft\" }] }\n\
         [cd.half0]\ninject = { at = [{ rank = 3, iteration = 0, kind = \"soft\" }] }\n\
         [cd.leaf]\nretries = 0\ninject = { at = [{ rank = 5, iteration = 0, kind = \"soft\" }] }\n",
    ));
    let values = |o: &cd::CdOutcome<(Vec<f64>, [u32; 3])>| {
        o.results.iter().map(|r| r.0.clone()).collect::<Vec<_>>()
    };
    assert_eq!(values(&faulty), values(&clean));

    let r = &faulty.report;
    let all = r.cd("all").unwrap();
    assert_eq!((all.executions, all.reexecutions, all.injected), (16, 8, 1));
    // half0: ranks 0..4 re-execute because rank 3 failed; ranks 4..8 never saw it.
    let half0 = r.cd("half0").unwrap();
    assert_eq!((half0.executions, half0.reexecutions), (8, 4));
    // half1: rank 5's leaf escalated (retries 0) to half1, which re-executed on 4..8 only.
    let half1 = r.cd("half1").unwrap();
    assert_eq!(
        (half1.executions, half1.reexecutions, half1.escalations),
        (8, 4, 0)
    );
    let leaf = r.cd("leaf").unwrap();
    assert_eq!(
        (leaf.executions, leaf.escalations, leaf.reexecutions),
        (16, 4, 0)
    );

    for (rank, (_, runs)) in faulty.results.iter().enumerate() {
        assert_eq!(runs[0], 2, "rank {rank} re-ran all");
        assert_eq!(runs[1], 2, "rank {rank} re-ran its half");
        assert_eq!(runs[2], 2, "rank {rank} ran leaf once per half execution");
    }
}

#[test]
fn a_split_team_recovers_without_disturbing_the_other_team() {
    let clean = program(CdConfig::default());
    let faulty = program(config(
        "[cd.half0]\nmedium = \"buddy\"\n\
         inject = { at = [{ rank = 2, iteration = 0, kind = \"rank_loss\" }] }\n",
    ));
    assert_eq!(
        faulty.results.iter().map(|r| &r.0).collect::<Vec<_>>(),
        clean.results.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    let r = &faulty.report;
    assert_eq!(r.cd("half0").unwrap().reexecutions, 4);
    assert_eq!(
        r.cd("half1").unwrap().reexecutions,
        0,
        "the other team is not disturbed"
    );
    assert_eq!(r.cd("all").unwrap().reexecutions, 0);
    for (rank, (_, runs)) in faulty.results.iter().enumerate() {
        let expect = if rank < 4 { [1, 2, 2] } else { [1, 1, 1] };
        assert_eq!(*runs, expect, "rank {rank}");
    }
}
