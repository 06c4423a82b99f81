// Options are preserve(...), name = "...", team = ..., local.
use cd_runtime as cd;

#[cd::strict(preserve(u), retries = 3)]
fn step(u: &mut Vec<f64>) -> Result<(), cd::CdError> {
    u.push(1.0);
    Ok(())
}

fn main() {}
