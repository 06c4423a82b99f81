//! Parallel restart (`restart_threads`): a re-execution gets the process's pool of that many
//! threads, a first execution and a serial restart get none, and work spread over the pool
//! re-executes to the same bits.

mod common;

use cd_runtime as cd;
use common::{config, run};
use rayon::prelude::*;

/// A sum in a fixed order over chunks computed in parallel: the same bits on any pool.
fn work(v: &[f64]) -> f64 {
    let parts: Vec<f64> = v
        .par_chunks(64)
        .map(|c| c.iter().map(|x| x.sqrt()).sum::<f64>())
        .collect();
    parts.iter().sum()
}

#[test]
fn a_reexecution_gets_the_restart_pool_and_the_same_bits() {
    for threads in [1usize, 3] {
        let cfg = config(&format!(
            "[cd.step]\nrestart_threads = {threads}\n\
             inject = {{ at = [{{ rank = 1, iteration = 0, kind = \"soft\" }}] }}\n"
        ));
        let out = run(2, cfg, || {
            let v: Vec<f64> = (0..10_000)
                .map(|i| i as f64 + pgas::rank_me() as f64)
                .collect();
            let mut pools = Vec::new();
            let sum = cd::strict("step", |c| {
                let pool = c.restart_pool();
                pools.push((c.attempt(), pool.as_ref().map(|p| p.current_num_threads())));
                Ok(match pool {
                    Some(p) => p.install(|| work(&v)),
                    None => work(&v),
                })
            })?;
            Ok((sum, pools, work(&v)))
        })
        .unwrap();
        for (rank, (sum, pools, forward)) in out.results.iter().enumerate() {
            assert_eq!(
                sum.to_bits(),
                forward.to_bits(),
                "rank {rank}, {threads} threads"
            );
            let want_re = (threads > 1).then_some(threads);
            assert_eq!(
                *pools,
                [(0, None), (1, want_re)],
                "rank {rank}: a pool in the re-execution only, of {threads} threads"
            );
        }
    }
}

#[test]
fn pools_are_shared_by_thread_count() {
    let cfg = config(
        "[cd.step]\nrestart_threads = 2\ninject = { at = [{ rank = 0, iteration = 0, kind = \"soft\" }, { rank = 0, iteration = 1, kind = \"soft\" }] }\n",
    );
    let out = run(1, cfg, || {
        let mut seen = Vec::new();
        for _ in 0..2 {
            cd::strict("step", |c| {
                if let Some(p) = c.restart_pool() {
                    seen.push(std::sync::Arc::as_ptr(&p) as usize);
                }
                Ok(())
            })?;
        }
        Ok(seen)
    })
    .unwrap();
    let seen = &out.results[0];
    assert_eq!(seen.len(), 2, "one re-execution per instance");
    assert_eq!(seen[0], seen[1], "the second recovery reuses the pool");
}
