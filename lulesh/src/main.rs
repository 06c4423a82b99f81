//! Command-line driver: parses options, runs the simulation, prints the
//! reference's report.

use std::io::Write;
use std::process::ExitCode;

use lulesh::options::{self, Command};
use lulesh::verify::fmt_e;
use lulesh::{FinalReport, Simulation};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let exe = args.first().map_or("lulesh", String::as_str);
    let opts = match options::parse(&args[1..]) {
        Ok(Command::Run(o)) => o,
        Ok(Command::Help) => {
            print!("{}", options::usage(exe));
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            if matches!(err, options::OptionsError::Unknown(_)) {
                eprint!("{}", options::usage(exe));
            }
            eprintln!("{err}");
            return ExitCode::from(255);
        }
    };

    let mut sim = match Simulation::single_rank(&opts) {
        Ok(s) => s,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(err.exit_code() as u8);
        }
    };
    let num_ranks = sim.comm.num_ranks();
    let rank = sim.comm.rank();
    let talk = rank == 0 && !opts.quiet;
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
    let result = sim.run(opts.its, |dom| {
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
    });
    let elapsed = match result {
        Ok(t) => t,
        Err(err) => {
            let _ = stdout.lock().flush();
            eprintln!("{err}");
            return ExitCode::from(err.exit_code() as u8);
        }
    };
    if talk {
        let report = FinalReport::new(&sim.domain, elapsed, opts.nx, num_ranks);
        print!("{}", report.render());
    }
    ExitCode::SUCCESS
}
