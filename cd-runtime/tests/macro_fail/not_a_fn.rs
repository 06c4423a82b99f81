// The attribute applies to plain (not async, not const) functions only.
use cd_runtime as cd;

#[cd::strict(preserve(x))]
struct State {
    x: Vec<f64>,
}

#[cd::strict]
async fn fetch() -> Result<(), cd::CdError> {
    Ok(())
}

fn main() {}
