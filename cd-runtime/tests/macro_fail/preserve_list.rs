// Misuse of preserve(...): a name that is not a parameter, a parameter listed twice, `self`,
// a name bound by a pattern, a shared reference.
use cd_runtime as cd;

#[cd::strict(preserve(u, x))]
fn not_a_parameter(u: &mut Vec<f64>) -> Result<(), cd::CdError> {
    u.push(1.0);
    Ok(())
}

#[cd::strict(preserve(u, u))]
fn twice(u: &mut Vec<f64>) -> Result<(), cd::CdError> {
    u.push(1.0);
    Ok(())
}

struct Grid(Vec<f64>);

impl Grid {
    #[cd::strict(preserve(self))]
    fn step(&mut self) -> Result<(), cd::CdError> {
        self.0.push(1.0);
        Ok(())
    }
}

#[cd::strict(preserve(a))]
fn pattern((a, b): (f64, f64)) -> Result<f64, cd::CdError> {
    Ok(a + b)
}

#[cd::strict(preserve(u))]
fn shared(u: &Vec<f64>) -> Result<f64, cd::CdError> {
    Ok(u[0])
}

fn main() {}
