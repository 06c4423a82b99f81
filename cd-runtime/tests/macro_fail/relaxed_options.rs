// Options of #[cd::relaxed] are preserve(...), private(x = len), privatized(x = len),
// name = "...": an unknown one, `team` and `local` (strict only), a class without lengths,
// and an access class on #[cd::strict].
use cd_runtime as cd;
use pgas::GlobalPtr;

#[cd::relaxed(preserve(u), retries = 3)]
fn unknown(u: &mut Vec<f64>) -> Result<(), cd::CdError> {
    u.push(1.0);
    Ok(())
}

#[cd::relaxed(team = pgas::world())]
fn on_team() -> Result<(), cd::CdError> {
    Ok(())
}

#[cd::relaxed(local)]
fn local() -> Result<(), cd::CdError> {
    Ok(())
}

#[cd::relaxed(private(p))]
fn no_length(p: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

#[cd::relaxed(privatized)]
fn bare() -> Result<(), cd::CdError> {
    Ok(())
}

#[cd::relaxed(name = "a", name = "b")]
fn named_twice() -> Result<(), cd::CdError> {
    Ok(())
}

#[cd::strict(private(p = 4))]
fn strict_private(p: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

fn main() {}
