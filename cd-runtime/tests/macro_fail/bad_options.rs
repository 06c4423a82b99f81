// Malformed options: a name that is not a string, `local` with `team`, preserve without a list.
use cd_runtime as cd;

#[cd::strict(name = step)]
fn named() -> Result<(), cd::CdError> {
    Ok(())
}

#[cd::strict(local, team = pgas::world())]
fn both() -> Result<(), cd::CdError> {
    Ok(())
}

#[cd::strict(preserve)]
fn bare() -> Result<(), cd::CdError> {
    Ok(())
}

fn main() {}
