//! `hpgmg log2_box_dim target_boxes_per_rank`: the HPGMG-FV benchmark on one rank.

use clap::Parser;
use clap::error::ErrorKind;
use std::io::Write;
use std::process::ExitCode;

/// HPGMG-FV benchmark (serial port): FMG solves of a 4th-order variable-coefficient Poisson problem.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// log2 of the cells per box side (4..=9)
    #[arg(allow_negative_numbers = true)]
    log2_box_dim: i64,
    /// Target number of boxes per rank (at least 1)
    #[arg(allow_negative_numbers = true)]
    target_boxes_per_rank: i64,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("{first} (usage: hpgmg <log2_box_dim> <target_boxes_per_rank>)");
            return ExitCode::from(2);
        }
    };
    let cfg = match hpgmg::configure(cli.log2_box_dim, cli.target_boxes_per_rank, 1) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("hpgmg: {e}");
            return ExitCode::from(1);
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::LineWriter::new(stdout.lock());
    match hpgmg::run(cfg, &mut out) {
        Ok(_) => {
            let _ = out.flush();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hpgmg: output failed: {e}");
            ExitCode::from(1)
        }
    }
}
