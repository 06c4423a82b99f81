//! `CD_CONFIG` through `launch_from_env`. The only test of this binary: environment variables
//! are process-wide, and tests of one binary run in parallel.

use cd_runtime as cd;
use cd_runtime::CdLaunchError;
use gasnet_bridge::LaunchConfig;

fn program() -> Result<cd::CdOutcome<u64>, CdLaunchError> {
    let job = LaunchConfig::new(2).segment_bytes(1 << 20);
    cd::launch_from_env(&job, pgas::RpcTable::new(), || {
        let mut x = 1u64;
        for _ in 0..3 {
            cd::strict("step", |c| {
                c.preserve("x", &mut x);
                x = x * 5 + 1;
                Ok(())
            })?;
        }
        Ok(x)
    })
}

#[test]
fn cd_config_names_the_configuration_file() {
    let dir = std::env::temp_dir().join(format!("cd-config-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // SAFETY (edition 2024 marks these unsafe): this binary's only test, so no other thread
    // reads the environment meanwhile.
    unsafe { std::env::remove_var("CD_CONFIG") };
    let plain = program().unwrap();
    assert_eq!(plain.results, vec![156, 156]);
    assert_eq!(plain.report.cd("step").unwrap().reexecutions, 0);

    let missing = dir.join("missing.toml");
    unsafe { std::env::set_var("CD_CONFIG", &missing) };
    match program() {
        Err(CdLaunchError::Config(e)) => {
            assert_eq!(e.file, missing);
            assert!(e.to_string().contains("missing.toml"), "{e}");
            assert!(e.to_string().contains("(named by CD_CONFIG)"), "{e}");
        }
        other => panic!(
            "expected a configuration error, got {:?}",
            other.map(|o| o.results)
        ),
    }

    // The program's own rule: the command line wins over CD_CONFIG; an empty one is unset.
    let (a, b) = (dir.join("a.toml"), dir.join("b.toml"));
    std::fs::write(&a, "seed = 1\n").unwrap();
    std::fs::write(&b, "seed = 2\n").unwrap();
    unsafe { std::env::set_var("CD_CONFIG", &b) };
    let seed =
        |cli: Option<&std::path::Path>| cd::CdConfig::for_program(cli).unwrap().map(|c| c.seed);
    assert_eq!((seed(Some(&a)), seed(None)), (Some(1), Some(2)));
    unsafe { std::env::set_var("CD_CONFIG", "") };
    assert_eq!(seed(None), None, "empty: unset");
    let e = cd::CdConfig::for_program(Some(&missing)).unwrap_err();
    assert!(e.to_string().contains("(named by --cd-config)"), "{e}");

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[cd.step]\ninject = { soft_error = 2.0 }\n").unwrap();
    unsafe { std::env::set_var("CD_CONFIG", &bad) };
    let e = program().map(|o| o.results).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "{}:2: key `cd.step.inject.soft_error`",
            bad.display()
        )),
        "{msg}"
    );

    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "[cd.step]\nmedium = \"buddy\"\ninject = { at = [{ rank = 1, iteration = 1, kind = \"rank_loss\" }] }\n",
    )
    .unwrap();
    unsafe { std::env::set_var("CD_CONFIG", &good) };
    let faulty = program().unwrap();
    unsafe { std::env::remove_var("CD_CONFIG") };
    assert_eq!(faulty.results, plain.results);
    let s = faulty.report.cd("step").unwrap();
    assert_eq!((s.reexecutions, s.injected), (2, 1));
    assert!(s.bytes_buddy > 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
