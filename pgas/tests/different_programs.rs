//! Processes of one mpirun job that register different rpc functions are refused at launch,
//! with one error naming the ranks and the functions, before any body runs.
//!
//! Runs itself under `mpirun -n 2` (`--child`): `PGAS_TEST_EXTRA_RPC_ON=R` makes the process
//! of rank R register one more `RpcTable` function than the others, as a process started from
//! another build of the program would. A run without it is the control: the body runs.
//! Built only with the `mpi` feature (`cargo test -p pgas --features mpi --test
//! different_programs`): on smp every rank is one process with one registry.

use std::time::{Duration, Instant};

use pgas::{LaunchConfig, LaunchError, RpcTable};

#[pgas::remote]
fn ping(x: u32) -> u32 {
    x + 1
}

fn child() {
    let (rank, _) = pgas::mpi_world()
        .expect("the MPI world")
        .expect("started by mpirun");
    let mut table = RpcTable::new();
    let _ = table.register("common", |x: u64| x);
    let differ = std::env::var("PGAS_TEST_EXTRA_RPC_ON").ok();
    if differ.is_some_and(|r| r.trim() == rank.to_string()) {
        let _ = table.register("only_here", |x: u64| x + 1);
    }
    let cfg = LaunchConfig::new(2).segment_bytes(1 << 20);
    let out = pgas::launch(&cfg, table, || {
        println!("rank {} ran its body", pgas::rank_me());
        pgas::rpc((pgas::rank_me() + 1) % 2, ping, 1).wait()
    });
    match out {
        Ok(r) => println!(
            "result of rank {rank}: ok {:?}",
            r.rank0().or(r.iter().next())
        ),
        Err(LaunchError::DifferentPrograms { message }) => {
            println!("result of rank {rank}: different programs: {message}")
        }
        Err(e) => println!("result of rank {rank}: other error: {e}"),
    }
}

/// Runs the child job, `extra_on` naming the rank that registers one more function; returns
/// its standard output.
fn job(extra_on: Option<usize>) -> String {
    let mut cmd = gasnet_bridge::conduit::mpirun_command(2);
    cmd.arg(std::env::current_exe().expect("own path"))
        .arg("--child");
    if let Some(r) = extra_on {
        cmd.env("PGAS_TEST_EXTRA_RPC_ON", r.to_string());
    }
    let start = Instant::now();
    let out = cmd.output().expect("start mpirun");
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "the job took over a minute"
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the job failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--child") {
        child();
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if !gasnet_bridge::conduit::require_mpirun("different_programs") {
        return;
    }
    let same = job(None);
    for r in 0..2 {
        assert!(same.contains(&format!("rank {r} ran its body")), "{same}");
        assert!(same.contains(&format!("result of rank {r}: ok")), "{same}");
    }
    let differ = job(Some(1));
    assert!(!differ.contains("ran its body"), "no body runs:\n{differ}");
    for r in 0..2 {
        let line = differ
            .lines()
            .find(|l| l.starts_with(&format!("result of rank {r}: ")))
            .unwrap_or_else(|| panic!("rank {r} printed no result:\n{differ}"));
        assert!(
            line.contains("different programs: the processes of this job run different programs")
                && line.contains("rank 1 has RpcTable functions rank 0 lacks: `only_here`")
                && line.contains("same binary"),
            "{line}"
        );
    }
    eprintln!("different_programs: refused at launch on both ranks, control job ran");
}
