//! Frees deferred inside relaxed CDs and a re-execution: the re-executed body frees the same
//! block again, which must not be a second `delete_` of a block whose free is deferred
//! (found by tests/tests/relaxed_prop.rs: `BadFree { what: "a pointer already freed (its
//! free is deferred)" }`). The deferral of the failed execution is cancelled instead.

mod common;

use cd_runtime as cd;
use common::{config, run};
use pgas::barrier;

/// A relaxed CD frees a block allocated before it, fails, and replays (the free again).
#[test]
fn a_relaxed_replay_frees_an_older_block_again() {
    let cfg = config("[cd.fr]\ninject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n");
    let out = run(2, cfg, || {
        let p = pgas::new_array::<u64>(4).unwrap();
        p.write_local_slice(&[1, 2, 3, 4]).unwrap();
        let before = pgas::shared_bytes_in_use();
        let sum = cd::strict("outer", |_| {
            cd::relaxed("fr", |_| {
                let mut w = [0u64; 4];
                p.read_local_slice(&mut w).unwrap();
                pgas::delete_(p).unwrap();
                Ok(w.iter().sum::<u64>())
            })
        })?;
        let after = pgas::shared_bytes_in_use();
        barrier();
        Ok((sum, before - after))
    })
    .unwrap();
    for (sum, freed) in &out.results {
        assert_eq!(*sum, 10);
        assert_eq!(*freed, 32, "freed once, at the strict completion");
    }
    assert_eq!(out.report.cd("fr").unwrap().reexecutions, 1);
}

/// A strict CD whose relaxed child freed an older block re-executes (the free again).
#[test]
fn a_strict_reexecution_frees_an_older_block_again() {
    let cfg = config("[cd.st]\ninject = { at = [{ rank = 0, iteration = 0, kind = \"soft\" }] }\n");
    let out = run(2, cfg, || {
        let p = pgas::new_array::<u64>(4).unwrap();
        p.write_local_slice(&[1, 2, 3, 4]).unwrap();
        let before = pgas::shared_bytes_in_use();
        let sum = cd::strict("st", |_| {
            cd::relaxed("child", |_| {
                let mut w = [0u64; 4];
                p.read_local_slice(&mut w).unwrap();
                pgas::delete_(p).unwrap();
                Ok(w.iter().sum::<u64>())
            })
        })?;
        let after = pgas::shared_bytes_in_use();
        barrier();
        Ok((sum, before - after))
    })
    .unwrap();
    for (sum, freed) in &out.results {
        assert_eq!(*sum, 10);
        assert_eq!(*freed, 32, "freed once, at the strict completion");
    }
    assert!(out.report.cd("st").unwrap().reexecutions > 0);
}
