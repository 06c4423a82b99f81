// private(x = len) and privatized(x = len) name GlobalPtr<T> parameters, with a usize length.
use cd_runtime as cd;
use pgas::GlobalPtr;

#[cd::relaxed(private(v = 4))]
fn slice(v: &mut [f64]) -> Result<(), cd::CdError> {
    v[0] = 1.0;
    Ok(())
}

#[cd::relaxed(privatized(p = "four"))]
fn length(p: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

fn main() {}
