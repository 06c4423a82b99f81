//! Rank and node losses under the xor medium, end to end: a 1-D diffusion over 6 ranks on two
//! emulated nodes of 3, whose state lives in the ranks' segments. A strict CD `iter` per time
//! step preserves each rank's slab on the xor medium (checksum groups of 2, one member on each
//! node); inside it, strict CDs `sweep` preserve on the local medium. Losses inside `iter`
//! are rebuilt from the groups' parity; a loss inside `sweep` takes its local copies, escalates,
//! and `iter` rebuilds and re-executes; the loss of a whole node takes one member of every
//! group and is contained too. Every faulty run gives the bits of the fault-free run.

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError};
use gasnet_bridge::LaunchConfig;
use pgas::GlobalPtr;

const RANKS: usize = 6;
const PER_NODE: usize = 3;
/// Cells per rank.
const CELLS: usize = 64;
const ITERS: u64 = 4;
const SWEEPS: u64 = 2;
const M: f64 = 1_000_003.0;

fn job() -> LaunchConfig {
    LaunchConfig::new(RANKS)
        .segment_bytes(1 << 20)
        .ranks_per_node(PER_NODE)
}

/// One sweep: every rank reads the edge cells of its neighbours (a ring), then updates its slab
/// (integer-valued arithmetic, exact in f64).
fn sweep(slabs: &[GlobalPtr<f64>], salt: u64) {
    let me = pgas::rank_me();
    let n = pgas::rank_n();
    pgas::barrier();
    let left = pgas::rget(slabs[(me + n - 1) % n] + (CELLS - 1)).wait();
    let right = pgas::rget(slabs[(me + 1) % n]).wait();
    let mut u = pgas::rget_slice(slabs[me], CELLS).wait();
    pgas::barrier();
    let old = u.clone();
    for i in 0..CELLS {
        let l = if i == 0 { left } else { old[i - 1] };
        let r = if i + 1 == CELLS { right } else { old[i + 1] };
        u[i] = (l + 2.0 * old[i] + r + (salt + me as u64) as f64) % M;
    }
    pgas::rput_slice(&u, slabs[me]).wait();
}

fn program(cfg: CdConfig) -> Result<cd::CdOutcome<Vec<f64>>, cd::CdLaunchError> {
    cd::launch(&job(), cfg, pgas::RpcTable::new(), || {
        let me = pgas::rank_me();
        let mine = pgas::new_array::<f64>(CELLS).unwrap();
        let init: Vec<f64> = (0..CELLS)
            .map(|i| ((i * 31 + me * 7) % 97) as f64)
            .collect();
        pgas::rput_slice(&init, mine).wait();
        let slabs: Vec<GlobalPtr<f64>> = pgas::allgather(mine).wait();
        // A rank-dependent amount of private state too, so the groups pad to their largest.
        let mut history: Vec<f64> = vec![0.0; 8 + me * 5];
        for it in 0..ITERS {
            cd::strict("iter", |c| {
                c.preserve_global("slab", mine, CELLS);
                c.preserve_slice("history", &mut history);
                for s in 0..SWEEPS {
                    cd::strict("sweep", |c| {
                        c.preserve_global("slab", mine, CELLS);
                        sweep(&slabs, it * SWEEPS + s);
                        Ok::<(), CdError>(())
                    })?;
                }
                let first = pgas::rget(mine).wait();
                history.rotate_right(1);
                history[0] = first;
                Ok(())
            })?;
        }
        let mut out = pgas::rget_slice(mine, CELLS).wait();
        out.extend(history);
        Ok(out)
    })
}

fn config(faults: &str) -> CdConfig {
    CdConfig::parse(
        &format!(
            "[cd.iter]\nmedium = \"xor\"\nxor_group = 2\n{faults}\n\
             [cd.sweep]\nmedium = \"local\"\n"
        ),
        "xor_rank_loss.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn xor_losses_of_ranks_and_of_a_node_give_the_fault_free_answer() {
    let clean = program(CdConfig::default()).unwrap();
    let plain = program(config("")).unwrap();
    assert_eq!(plain.results, clean.results, "CDs on xor change no bit");

    // One rank lost inside `iter`: its group rebuilds it.
    let one = program(config(
        "inject = { at = [{ rank = 4, iteration = 1, kind = \"rank_loss\" }] }",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(one.results, clean.results);
    let s = one.report.cd("iter").unwrap();
    assert_eq!((s.reexecutions, s.escalations), (RANKS as u64, 0), "{s:?}");

    // The whole of node 1 (ranks 3, 4, 5) lost at once: one member of every group.
    let node = program(config(
        "inject = { at = [\
         { rank = 3, iteration = 2, kind = \"rank_loss\" }, \
         { rank = 4, iteration = 2, kind = \"rank_loss\" }, \
         { rank = 5, iteration = 2, kind = \"rank_loss\" }] }",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(node.results, clean.results);
    assert_eq!(node.report.cd("iter").unwrap().escalations, 0);
}

#[test]
fn a_loss_in_a_local_child_is_rebuilt_by_the_xor_parent() {
    let clean = program(CdConfig::default()).unwrap();
    let cfg = CdConfig::parse(
        "[cd.iter]\nmedium = \"xor\"\nxor_group = 2\n\
         [cd.sweep]\ninject = { at = [{ rank = 1, iteration = 3, kind = \"rank_loss\" }] }\n",
        "xor_rank_loss.toml",
    )
    .unwrap();
    let faulty = program(cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(faulty.results, clean.results);
    let r = &faulty.report;
    assert_eq!(r.cd("sweep").unwrap().escalations, RANKS as u64);
    assert_eq!(r.cd("iter").unwrap().reexecutions, RANKS as u64);
}
