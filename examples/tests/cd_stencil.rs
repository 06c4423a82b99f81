//! `cd_stencil`: the checksum under injected soft errors and rank losses equals the fault-free
//! one (and `stencil`'s), with re-executions in the report; a bad configuration is a clear
//! error.

mod common;

use common::{
    ESCALATING_RANK, ESCALATION_CONFIG, dependents_in_2x2x2, escalation_line, run, run_ok,
    stdout_of_success,
};

const CD_STENCIL: &str = env!("CARGO_BIN_EXE_cd_stencil");
const STENCIL: &str = env!("CARGO_BIN_EXE_stencil");

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{out}"))
}

/// The "iteration" row of the report table: (execs, reexecs, escal, injected).
fn iteration_row(out: &str) -> [u64; 4] {
    row(out, "iteration ")
}

/// A CD's row of the report table: (execs, reexecs, escal, injected).
fn row(out: &str, prefix: &str) -> [u64; 4] {
    let cols: Vec<u64> = line(out, prefix)
        .split_whitespace()
        .skip(2)
        .take(4)
        .map(|c| c.parse().unwrap())
        .collect();
    [cols[0], cols[1], cols[2], cols[3]]
}

fn temp_toml(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("cd-stencil-{}-{name}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn faults_do_not_change_the_checksum() {
    let args = ["--ranks", "4", "--n", "24", "--iters", "12"];
    let clean = run_ok(CD_STENCIL, &args);
    assert!(clean.contains("identical to serial run"), "{clean}");
    assert_eq!(iteration_row(&clean), [48, 0, 0, 0]);
    let plain = run_ok(STENCIL, &args);
    assert_eq!(line(&clean, "checksum "), line(&plain, "checksum "));

    let toml = temp_toml(
        "faults",
        "seed = 5\n\
         [cd.iteration]\n\
         medium = \"buddy\"\n\
         retries = 4\n\
         inject = { soft_error = 0.02, rank_loss = 0.02, at = [\n\
           { rank = 1, iteration = 2, kind = \"rank_loss\" },\n\
           { rank = 3, iteration = 5, kind = \"soft\" },\n\
           { rank = 0, iteration = 9, kind = \"rank_loss\" } ] }\n",
    );
    let mut with = args.to_vec();
    let path = toml.to_string_lossy().into_owned();
    with.extend(["--cd-config", &path]);
    let faulty = run_ok(CD_STENCIL, &with);
    std::fs::remove_file(&toml).unwrap();
    assert_eq!(
        line(&faulty, "checksum "),
        line(&clean, "checksum "),
        "\nfaulty:\n{faulty}\nclean:\n{clean}"
    );
    let [execs, reexecs, escal, injected] = iteration_row(&faulty);
    assert!(injected >= 3, "{faulty}");
    assert!(
        reexecs >= 4 * 3,
        "every fault re-executes the 4 ranks: {faulty}"
    );
    assert_eq!(execs, 48 + reexecs);
    assert_eq!(escal, 0);
    assert!(
        faulty.contains(&format!("{reexecs} re-executions")),
        "{faulty}"
    );
}

#[test]
fn file_medium_and_soft_errors_only() {
    let dir = std::env::temp_dir().join(format!("cd-stencil-files-{}", std::process::id()));
    let toml = temp_toml(
        "file",
        &format!(
            "file_dir = {dir:?}\n[cd.iteration]\nmedium = \"file\"\n\
             inject = {{ at = [{{ rank = 1, iteration = 0, kind = \"soft\" }}, \
             {{ rank = 0, iteration = 4, kind = \"rank_loss\" }}] }}\n"
        ),
    );
    let path = toml.to_string_lossy().into_owned();
    let args = ["--ranks", "2", "--n", "16", "--iters", "6"];
    let clean = run_ok(CD_STENCIL, &args);
    let mut with = args.to_vec();
    with.extend(["--cd-config", &path]);
    let faulty = run_ok(CD_STENCIL, &with);
    std::fs::remove_file(&toml).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(line(&faulty, "checksum "), line(&clean, "checksum "));
    assert_eq!(iteration_row(&faulty), [16, 4, 0, 2]);
}

#[test]
fn a_bad_configuration_names_file_line_and_key() {
    let toml = temp_toml("bad", "[cd.iteration]\nmedium = \"buddy\"\nretrys = 2\n");
    let path = toml.to_string_lossy().into_owned();
    let out = run(
        CD_STENCIL,
        &["--ranks", "2", "--n", "8", "--cd-config", &path],
        &[],
    );
    std::fs::remove_file(&toml).unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{path}:3: key `retrys`")), "{err}");

    let out = run(
        CD_STENCIL,
        &[
            "--ranks",
            "2",
            "--n",
            "8",
            "--cd-config",
            "/nonexistent/cd.toml",
        ],
        &[],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/cd.toml"), "{err}");
}

/// Relaxed CDs from the configuration alone: one soft error in the per-rank relaxed CD, at
/// several iterations and ranks (and several in one run), leaves the checksum of the
/// fault-free run, with exactly the failed rank re-executing and no strict re-execution.
#[test]
fn relaxed_cds_reexecute_one_rank_per_fault() {
    let args = ["--ranks", "4", "--n", "16", "--iters", "8"];
    let clean = run_ok(CD_STENCIL, &args);
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/configs/cd_stencil_relaxed.toml"
    );
    let cases: [&[(usize, usize)]; 5] = [
        &[(0, 0)],
        &[(3, 1)],
        &[(2, 4)],
        &[(1, 7)],
        &[(1, 2), (3, 5), (0, 6)],
    ];
    for faults in cases {
        let at: Vec<String> = faults
            .iter()
            .map(|(r, i)| format!("{{ rank = {r}, iteration = {i}, kind = \"soft\" }}"))
            .collect();
        let toml = temp_toml(
            "relaxed",
            &format!(
                "[cd.rank_step]\nkind = \"relaxed\"\ninject = {{ at = [{}] }}\n",
                at.join(", ")
            ),
        );
        let path = toml.to_string_lossy().into_owned();
        let mut with = args.to_vec();
        with.extend(["--cd-config", &path]);
        let out = run_ok(CD_STENCIL, &with);
        std::fs::remove_file(&toml).unwrap();
        assert_eq!(line(&out, "checksum "), line(&clean, "checksum "), "{out}");
        let n = faults.len() as u64;
        assert_eq!(iteration_row(&out), [32, 0, 0, 0], "{out}");
        assert_eq!(row(&out, "rank_step "), [32 + n, n, 0, n], "{out}");
        let records: Vec<String> = faults
            .iter()
            .map(|(r, i)| format!("#{i}.1: [{r}]"))
            .collect();
        assert!(
            out.contains(&format!(
                "re-executed ranks per failure of rank_step: {}",
                records.join(", ")
            )),
            "{out}"
        );
    }
    // The shipped example configuration.
    let mut with = ["--ranks", "4", "--n", "24", "--iters", "12"].to_vec();
    let plain = run_ok(CD_STENCIL, &with);
    with.extend(["--cd-config", shipped]);
    let out = run_ok(CD_STENCIL, &with);
    assert_eq!(line(&out, "checksum "), line(&plain, "checksum "), "{out}");
    assert!(out.contains("relaxed cd: 2 faults injected, 2 re-executions, 0 escalations"));
}

/// Dependency tracking from the configuration alone (the shipped
/// `configs/cd_stencil_escalation.toml`): rank 6's relaxed CD escalates to "iteration", which
/// keeps dependency lists. With one rank per emulated node exactly rank 6 and the ranks that
/// put faces into it re-execute; with all 8 on one node, all of them (D is everyone); the
/// checksum is the fault-free one both times. tests/mpi.rs runs the same under mpirun.
#[test]
fn an_escalation_with_dependency_lists_reexecutes_the_failed_rank_and_its_writers() {
    let args = ["--ranks", "8", "--n", "16", "--iters", "6"];
    let clean = run_ok(CD_STENCIL, &args);
    let mut with = args.to_vec();
    with.extend(["--cd-config", ESCALATION_CONFIG]);
    let everyone: Vec<usize> = (0..8).collect();
    for (per_node, expected) in [("1", dependents_in_2x2x2(ESCALATING_RANK)), ("8", everyone)] {
        let what = format!("PGAS_RANKS_PER_NODE={per_node} cd_stencil {with:?}");
        let out = stdout_of_success(
            &what,
            run(CD_STENCIL, &with, &[("PGAS_RANKS_PER_NODE", per_node)]),
        );
        assert_eq!(
            line(&out, "checksum "),
            line(&clean, "checksum "),
            "{what}:\n{out}"
        );
        assert_eq!(
            line(&out, "re-executed ranks per failure of iteration: "),
            escalation_line(&expected),
            "{what}:\n{out}"
        );
        assert_eq!(
            iteration_row(&out),
            [48 + expected.len() as u64, expected.len() as u64, 0, 0],
            "{what}:\n{out}"
        );
        assert_eq!(
            row(&out, "rank_step "),
            [48 + expected.len() as u64, 0, 1, 1]
        );
    }
}
