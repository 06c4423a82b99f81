// A #[cd::strict] function returns Result<T, CdError>.
use cd_runtime as cd;

#[cd::strict]
fn nothing(u: &mut [f64]) {
    u[0] = 1.0;
}

#[cd::strict]
fn value(u: &mut [f64]) -> f64 {
    u[0]
}

#[derive(Debug)]
struct MyError;

#[cd::strict]
fn other_error(u: &mut [f64]) -> Result<f64, MyError> {
    Ok(u[0])
}

fn main() {}
