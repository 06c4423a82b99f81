//! Command-line options with the reference's flags, defaults and messages
//! (`ParseCommandLineOptions` in lulesh-util.cc), plus `--threads`,
//! `--ranks` and `--cd-config`.

use std::path::PathBuf;

use thiserror::Error;

/// Settings of one run; defaults are those of the reference `main`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `-i`: maximum number of cycles.
    pub its: i32,
    /// `-s`: elements along each edge of a rank's cube.
    pub nx: i32,
    /// `-r`: number of material regions.
    pub num_reg: i32,
    /// `-f`: number of viz files (accepted for compatibility; no viz output exists).
    pub num_files: i32,
    /// `-p`: print progress every cycle.
    pub show_prog: bool,
    /// `-q`: suppress all standard output.
    pub quiet: bool,
    /// `-b`: region load balance exponent.
    pub balance: i32,
    /// `-c`: extra EOS cost of the expensive regions.
    pub cost: i32,
    /// `--threads`: worker threads; 1 reproduces the serial reference bit for bit.
    pub threads: usize,
    /// `--ranks`: ranks of a multi-rank run (a cube); `None` if not given
    /// (then `PGAS_RANKS`, else 1).
    pub ranks: Option<usize>,
    /// `--cd-config`: run every time step as a Containment Domain configured
    /// by this TOML file (see [`crate::containment`]); `None` runs without
    /// any CD runtime.
    pub cd_config: Option<PathBuf>,
    /// `--restart DIR|auto`: resume from a checkpoint of the CD "step" (its `checkpoint`
    /// key); `None`: `CD_RESTART`, else start from the beginning.
    pub restart: Option<String>,
    /// `--spares S`: spare processes (mpi conduit, feature `ulfm`, under
    /// `mpirun --with-ft ulfm -n N+S`) that take a killed rank's place; `None`: `PGAS_SPARES`.
    pub spares: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            its: 9_999_999,
            nx: 30,
            num_reg: 11,
            num_files: 1,
            show_prog: false,
            quiet: false,
            balance: 1,
            cost: 1,
            threads: 1,
            ranks: None,
            cd_config: None,
            restart: None,
            spares: None,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the simulation with these options.
    Run(Options),
    /// `-h`: print the usage text and stop successfully.
    Help,
}

/// A command line the program cannot accept.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OptionsError {
    /// A flag that takes a value was the last argument.
    #[error("Missing integer argument to {0}")]
    MissingValue(String),
    /// `--cd-config` was the last argument.
    #[error("Missing file name after {0}")]
    MissingFile(String),
    /// A flag's value is not a decimal integer.
    #[error("Parse Error on option {flag} integer value required after argument (got '{value}')")]
    NotAnInteger {
        /// The flag.
        flag: String,
        /// What followed it.
        value: String,
    },
    /// A value outside the range the simulation can run with.
    #[error("Option {flag} must be at least {min} (got {value})")]
    OutOfRange {
        /// The flag.
        flag: String,
        /// The value given.
        value: i64,
        /// The smallest value allowed.
        min: i64,
    },
    /// `-v` needs the VisIt/Silo output, which this port does not have.
    #[error("Use of -v requires VisIt (silo) output support, which this port does not include")]
    VizUnsupported,
    /// A flag the program does not know.
    #[error("ERROR: Unknown command line argument: {0}")]
    Unknown(String),
}

/// Bytes one element of a rank's domain takes, about: 380 measured (`-s 20` and `-s 60`,
/// maximum resident set), with a margin. Nodes are counted with the elements.
pub const BYTES_PER_ELEMENT: u64 = 448;
/// Bytes one material region takes before it has elements (its lists and bin).
pub const BYTES_PER_REGION: u64 = 32;

/// Refuses a run this machine cannot hold, before anything is allocated: more worker threads
/// than [`pgas::limits::max_threads`], or `ranks_here` domains of `-s` elements per edge (and
/// `-r` regions) above the memory available. One line naming the options.
pub fn check_fits(opts: &Options, ranks_here: usize) -> Result<(), String> {
    pgas::limits::check_threads("--threads", opts.threads, "").map_err(|e| e.to_string())?;
    let nx = opts.nx as u64;
    let per_rank = nx
        .checked_mul(nx)
        .and_then(|v| v.checked_mul(nx))
        .and_then(|e| e.checked_mul(BYTES_PER_ELEMENT))
        .and_then(|b| b.checked_add(opts.num_reg as u64 * BYTES_PER_REGION));
    let rank_word = if ranks_here == 1 { "rank" } else { "ranks" };
    pgas::limits::check_memory(
        &format!(
            "-s {} -r {} ({ranks_here} {rank_word} in this process)",
            opts.nx, opts.num_reg
        ),
        per_rank.and_then(|b| b.checked_mul(ranks_here as u64)),
        "; lower -s or -r",
    )
    .map_err(|e| e.to_string())
}

/// The usage text of `-h` (same wording as the reference, plus `--threads`).
pub fn usage(execname: &str) -> String {
    format!(
        "Usage: {execname} [opts]\n \
where [opts] is one or more of:\n \
-q              : quiet mode - suppress all stdout\n \
-i <iterations> : number of cycles to run\n \
-s <size>       : length of cube mesh along side\n \
-r <numregions> : Number of distinct regions (def: 11)\n \
-b <balance>    : Load balance between regions of a domain (def: 1)\n \
-c <cost>       : Extra cost of more expensive regions (def: 1)\n \
-f <numfiles>   : Number of files to split viz dump into (def: (np+10)/9)\n \
-p              : Print out progress\n \
-v              : Output viz file (not supported by this port)\n \
--threads <n>   : Worker threads (def: 1; n >= 2 gathers forces per node)\n \
--ranks <n>     : Ranks, a cube: 1, 8, 27, ... (def: $PGAS_RANKS or 1;\n                   \
under mpirun: the number of processes)\n \
--cd-config <f> : Run each time step as a strict Containment Domain\n                   \
configured by the TOML file f (CD name \"step\": medium,\n                   \
retries, fault injection); prints the CD report table\n                   \
after the run report (-q suppresses it)\n \
--restart <d>   : Resume from the newest whole checkpoint (key `checkpoint`\n                   \
of [cd.step]) in d, or in its configured directory with\n                   \
d = auto (def: $CD_RESTART; none: from the beginning)\n \
--spares <s>    : Spare processes under `mpirun --with-ft ulfm -n N+s`\n                   \
(feature ulfm): a killed rank's process is replaced and\n                   \
the strict CD \"step\" resumes from memory (def: $PGAS_SPARES)\n \
-h              : This message\n\n"
    )
}

/// Parses an integer the way the reference's `StrToInt` does: `strtol`
/// syntax (leading blanks, optional sign, decimal digits) that must be
/// followed by nothing or a space.
fn str_to_int(token: &str) -> Option<i64> {
    let trimmed = token.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let bytes = trimmed.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let digits_start = end;
    while end < bytes.len() && bytes[end].is_ascii_digit() {
        end += 1;
    }
    if end == digits_start {
        return None;
    }
    if end < bytes.len() && bytes[end] != b' ' {
        return None;
    }
    trimmed[..end].parse::<i64>().ok()
}

fn int_value(args: &[String], i: usize, min: i64) -> Result<i64, OptionsError> {
    let flag = &args[i];
    let value = args
        .get(i + 1)
        .ok_or_else(|| OptionsError::MissingValue(flag.clone()))?;
    let parsed = str_to_int(value)
        .filter(|v| i32::try_from(*v).is_ok())
        .ok_or_else(|| OptionsError::NotAnInteger {
            flag: flag.clone(),
            value: value.clone(),
        })?;
    if parsed < min {
        return Err(OptionsError::OutOfRange {
            flag: flag.clone(),
            value: parsed,
            min,
        });
    }
    Ok(parsed)
}

/// Parses the arguments after the program name.
pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Command, OptionsError> {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    let mut opts = Options::default();
    let mut i = 0;
    while i < args.len() {
        // The values are range-checked to i32 in `int_value`.
        let as_i32 = |v: i64| v as i32;
        match args[i].as_str() {
            "-i" => opts.its = as_i32(int_value(&args, i, 0)?),
            "-s" => opts.nx = as_i32(int_value(&args, i, 1)?),
            "-r" => opts.num_reg = as_i32(int_value(&args, i, 1)?),
            "-f" => opts.num_files = as_i32(int_value(&args, i, 1)?),
            // The reference accepts a negative -b and then loops forever choosing regions.
            "-b" => opts.balance = as_i32(int_value(&args, i, 0)?),
            "-c" => opts.cost = as_i32(int_value(&args, i, 0)?),
            "--threads" => opts.threads = int_value(&args, i, 1)? as usize,
            "--ranks" => opts.ranks = Some(int_value(&args, i, 1)? as usize),
            "--spares" => opts.spares = Some(int_value(&args, i, 0)? as usize),
            "-p" => {
                opts.show_prog = true;
                i += 1;
                continue;
            }
            "-q" => {
                opts.quiet = true;
                i += 1;
                continue;
            }
            "--cd-config" => {
                let file = args
                    .get(i + 1)
                    .ok_or_else(|| OptionsError::MissingFile(args[i].clone()))?;
                opts.cd_config = Some(PathBuf::from(file));
            }
            "--restart" => {
                let from = args
                    .get(i + 1)
                    .ok_or_else(|| OptionsError::MissingFile(args[i].clone()))?;
                opts.restart = Some(from.clone());
            }
            "-v" => return Err(OptionsError::VizUnsupported),
            "-h" => return Ok(Command::Help),
            other => {
                if let Some(n) = other.strip_prefix("--threads=") {
                    let pair = ["--threads".to_owned(), n.to_owned()];
                    opts.threads = int_value(&pair, 0, 1)? as usize;
                    i += 1;
                    continue;
                }
                if let Some(f) = other.strip_prefix("--cd-config=") {
                    opts.cd_config = Some(PathBuf::from(f));
                    i += 1;
                    continue;
                }
                if let Some(n) = other.strip_prefix("--ranks=") {
                    let pair = ["--ranks".to_owned(), n.to_owned()];
                    opts.ranks = Some(int_value(&pair, 0, 1)? as usize);
                    i += 1;
                    continue;
                }
                return Err(OptionsError::Unknown(other.to_owned()));
            }
        }
        i += 2;
    }
    Ok(Command::Run(opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Options {
        match parse(args).unwrap() {
            Command::Run(o) => o,
            Command::Help => panic!("unexpected help"),
        }
    }

    #[test]
    fn defaults_and_flags() {
        assert_eq!(run(&[]), Options::default());
        let o = run(&[
            "-s", "12", "-i", "5", "-r", "3", "-b", "2", "-c", "4", "-p", "-q",
        ]);
        assert_eq!(
            (o.nx, o.its, o.num_reg, o.balance, o.cost),
            (12, 5, 3, 2, 4)
        );
        assert!(o.show_prog && o.quiet);
        assert_eq!(run(&["--threads", "3"]).threads, 3);
        assert_eq!(run(&["--threads=2"]).threads, 2);
        assert_eq!(run(&["--spares", "1"]).spares, Some(1));
        assert_eq!(run(&["--spares", "0"]).spares, Some(0));
        assert_eq!(run(&[]).spares, None);
        assert!(matches!(
            parse(&["--spares", "-1"]).unwrap_err(),
            OptionsError::OutOfRange { min: 0, .. }
        ));
        assert_eq!(run(&["--ranks", "8"]).ranks, Some(8));
        assert_eq!(run(&["--ranks=27"]).ranks, Some(27));
        assert!(matches!(
            parse(&["--ranks", "0"]).unwrap_err(),
            OptionsError::OutOfRange { .. }
        ));
        assert_eq!(parse(&["-h"]).unwrap(), Command::Help);
        assert_eq!(
            run(&["--cd-config", "cd.toml"]).cd_config,
            Some(PathBuf::from("cd.toml"))
        );
        assert_eq!(
            run(&["--cd-config=a/b.toml", "-s", "3"]).cd_config,
            Some(PathBuf::from("a/b.toml"))
        );
        assert_eq!(
            parse(&["--cd-config"]).unwrap_err(),
            OptionsError::MissingFile("--cd-config".into())
        );
    }

    #[test]
    fn impossible_runs_are_refused() {
        let mut o = run(&["-s", "10"]);
        assert!(check_fits(&o, 1).is_ok());
        o.nx = i32::MAX;
        let e = check_fits(&o, 1).unwrap_err();
        assert!(
            e.starts_with("-s 2147483647 -r 11 (1 rank in this process) needs"),
            "{e}"
        );
        o.nx = 10;
        o.threads = 1 << 30;
        assert!(
            check_fits(&o, 1)
                .unwrap_err()
                .starts_with("--threads 1073741824 is more")
        );
        assert!(matches!(
            parse(&["-b", "-1"]).unwrap_err(),
            OptionsError::OutOfRange { min: 0, .. }
        ));
    }

    #[test]
    fn strtol_like_integers() {
        assert_eq!(str_to_int(" 42"), Some(42));
        assert_eq!(str_to_int("-7"), Some(-7));
        assert_eq!(str_to_int("12 "), Some(12));
        assert_eq!(str_to_int("12x"), None);
        assert_eq!(str_to_int(""), None);
        assert_eq!(str_to_int("+"), None);
    }

    #[test]
    fn errors_name_the_cause() {
        assert_eq!(
            parse(&["-s"]).unwrap_err(),
            OptionsError::MissingValue("-s".into())
        );
        assert!(matches!(
            parse(&["-s", "ten"]).unwrap_err(),
            OptionsError::NotAnInteger { .. }
        ));
        assert!(matches!(
            parse(&["-s", "0"]).unwrap_err(),
            OptionsError::OutOfRange { .. }
        ));
        assert_eq!(
            parse(&["-x"]).unwrap_err().to_string(),
            "ERROR: Unknown command line argument: -x"
        );
    }
}
