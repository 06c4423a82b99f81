//! Command-line driver: parses options, runs the simulation on one rank or
//! a cube of ranks (`--ranks`), with or without Containment Domains
//! (`--cd-config`), prints the reference's report (and the CD report).
//!
//! Built with the `mpi` feature and started by `mpirun -n N`, every process
//! runs one rank of an N-rank job (the world size is the rank count); only
//! rank 0's process prints, as the reference's rank 0 does.

#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use lulesh::domain::Domain;
use lulesh::layout::BlockLayout;
use lulesh::options::{self, Command, Options};
use lulesh::verify::fmt_e;
use lulesh::{FinalReport, Simulation, containment, distributed};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let exe = args.first().map_or("lulesh", String::as_str);
    // Parsed before the conduit starts: `--spares` must be set before anything reads the
    // count (the MPI world's shape below already does).
    let parsed = options::parse(&args[1..]);
    if let Ok(Command::Run(Options {
        spares: Some(s), ..
    })) = &parsed
    {
        if let Err(set) = pgas::request_spares(*s) {
            pgas::stderr_line(format_args!(
                "--spares {s}: {set} spares were already asked for"
            ));
            return ExitCode::from(255);
        }
    }
    // Under the mpi conduit this process is one rank of a job that spans the
    // MPI world; otherwise (smp) every rank runs here.
    let mpi = match distributed::mpi_process() {
        Ok(m) => m,
        Err(err) => {
            pgas::stderr_line(format_args!("{err}"));
            return ExitCode::from(255);
        }
    };
    // Messages before the job starts come from rank 0's process only (every
    // process meets the same condition and exits with the same status).
    let speaks = mpi.is_none_or(|m| m.rank == 0);
    let opts = match parsed {
        Ok(Command::Run(o)) => o,
        Ok(Command::Help) => {
            if speaks {
                print!("{}", options::usage(exe));
            }
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            if speaks {
                if matches!(err, options::OptionsError::Unknown(_)) {
                    eprint!("{}", options::usage(exe));
                }
                pgas::stderr_line(format_args!("{err}"));
            }
            return ExitCode::from(255);
        }
    };

    let ranks = match rank_count(&opts) {
        Ok(n) => n,
        Err(err) => {
            if speaks {
                pgas::stderr_line(format_args!("{err}"));
            }
            return ExitCode::from(255);
        }
    };
    // Sizes and thread counts this machine cannot hold, refused before any
    // allocation (on smp every rank's domain lives in this process).
    let ranks_here = if mpi.is_some() { 1 } else { ranks as usize };
    if let Err(err) = options::check_fits(&opts, ranks_here) {
        if speaks {
            pgas::stderr_line(format_args!("{err}"));
        }
        return ExitCode::from(255);
    }
    // The reference's InitMeshDecomp check (and the job's shape), made
    // before anything runs or prints.
    let shape = if ranks == 1 {
        BlockLayout::decompose(ranks, 0, 1).map(|_| ())
    } else {
        distributed::launch_config(ranks as usize, opts.nx as usize).map(|_| ())
    };
    if let Err(err) = shape {
        if speaks {
            pgas::stderr_line(format_args!("{err}"));
        }
        return ExitCode::from(err.exit_code() as u8);
    }

    // With --cd-config (or CD_CONFIG) the whole run is a CD-managed job; a
    // configuration that cannot be used stops before anything runs or prints.
    let cd_config = match containment::program_config(opts.cd_config.as_deref())
        .and_then(|c| containment::restartable(c, &opts))
        .and_then(|c| {
            // Checked against the job (faults on ranks it lacks, `file_dir`,
            // `report_file`) before the banner.
            match &c {
                Some(c) => c
                    .check_job(ranks as usize)
                    .map_err(|e| lulesh::LuleshError::CdConfig(e.to_string())),
                None => Ok(()),
            }
            .map(|()| c)
        }) {
        Ok(c) => c,
        Err(err) => {
            if speaks {
                pgas::stderr_line(format_args!("{err}"));
            }
            return ExitCode::from(err.exit_code() as u8);
        }
    };

    // One rank keeps the serial code path (no pgas job at all). Under mpi the
    // rank count is the world size, so this is never taken when `mpirun`
    // started more than one process.
    let mut serial = if ranks == 1 && cd_config.is_none() {
        match Simulation::single_rank(&opts) {
            Ok(s) => Some(s),
            Err(err) => {
                pgas::stderr_line(format_args!("{err}"));
                return ExitCode::from(err.exit_code() as u8);
            }
        }
    } else {
        None
    };
    let num_ranks = ranks;
    let talk = !opts.quiet && speaks;
    if talk {
        let nx = i64::from(opts.nx);
        println!(
            "Running problem size {}^3 per domain until completion",
            opts.nx
        );
        println!("Num processors: {num_ranks}");
        if opts.threads > 1 {
            println!("Num threads: {}", opts.threads);
        }
        println!(
            "Total number of elements: {} \n",
            i64::from(num_ranks) * nx * nx * nx
        );
        println!("To run other sizes, use -s <integer>.");
        println!("To run a fixed number of iterations, use -i <integer>.");
        println!("To run a more or less balanced region set, use -b <integer>.");
        println!("To change the relative costs of regions, use -c <integer>.");
        println!("To print out progress, use -p");
        println!("To write an output file for VisIt, use -v");
        println!("See help (-h) for more options\n");
    }

    let show_prog = opts.show_prog && talk;
    let stdout = std::io::stdout();
    let progress = |dom: &Domain| {
        if show_prog {
            let mut out = stdout.lock();
            // A closed stdout must not abort the physics.
            let _ = writeln!(
                out,
                "cycle = {}, time = {}, dt={}",
                dom.ts.cycle,
                fmt_e(dom.ts.time, 6),
                fmt_e(dom.ts.deltatime, 6)
            );
        }
    };
    let mut cd_table = None;
    let result = match (serial.as_mut(), cd_config) {
        (Some(sim), _) => sim
            .run(opts.its, progress)
            .map(|elapsed| Some(FinalReport::new(&sim.domain, elapsed, opts.nx, 1))),
        (None, Some(config)) => {
            containment::run(&opts, ranks as usize, config, progress).map(|out| {
                out.map(|out| {
                    cd_table = Some(out.cd_report.table());
                    out.report
                })
            })
        }
        (None, None) => distributed::run(&opts, ranks as usize, progress),
    };
    // `None`: under mpi, a process other than rank 0's, which prints nothing.
    let report = match result {
        Ok(Some(r)) => r,
        Ok(None) => return ExitCode::SUCCESS,
        Err(err) => {
            let _ = stdout.lock().flush();
            // A CD escalation is the same in every process: rank 0's prints it.
            if speaks || !matches!(err, lulesh::LuleshError::Cd(_)) {
                // One whole line: lines of different processes do not interleave.
                let line = format!("{err}\n");
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }
            return ExitCode::from(err.exit_code() as u8);
        }
    };
    // Printed by the process that ran rank 0: under `--spares`, a spare that took rank 0's
    // place (its MPI rank is not 0) prints the report the dead process would have.
    if !opts.quiet {
        print!("{}", report.render());
        if let Some(table) = cd_table {
            print!("{table}");
        }
    }
    ExitCode::SUCCESS
}

/// Ranks asked for: `--ranks`, else `PGAS_RANKS`, else 1; under mpi the MPI
/// world size (`PGAS_RANKS` is ignored, a different `--ranks` is an error):
/// [`pgas::job_ranks`], the convention of every program here.
fn rank_count(opts: &Options) -> Result<i32, String> {
    let n = pgas::job_ranks("--ranks", opts.ranks, 1).map_err(|e| e.to_string())?;
    i32::try_from(n).map_err(|_| format!("too many ranks: {n}"))
}
