// #[cd::relaxed] applies to plain (not async, not const) functions returning
// Result<T, CdError>.
use cd_runtime as cd;

#[cd::relaxed(preserve(x))]
struct State {
    x: Vec<f64>,
}

#[cd::relaxed]
async fn fetch() -> Result<(), cd::CdError> {
    Ok(())
}

#[cd::relaxed]
const fn constant() -> Result<(), cd::CdError> {
    Ok(())
}

#[cd::relaxed]
fn nothing(u: &mut [f64]) {
    u[0] = 1.0;
}

#[cd::relaxed(name = "v")]
fn value(u: &mut [f64]) -> f64 {
    u[0]
}

fn main() {}
