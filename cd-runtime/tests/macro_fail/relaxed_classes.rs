// Misuse of private(...) / privatized(...): a name that is not a parameter, the same
// parameter in two classes or twice in one, a parameter both preserved and classified,
// a region's cells both preserved and privatized, `self`, a name bound by a pattern.
use cd_runtime as cd;
use pgas::GlobalPtr;

#[cd::relaxed(private(p = 4, q = 4))]
fn not_a_parameter(p: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

#[cd::relaxed(private(p = 4), privatized(p = 4))]
fn two_classes(p: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

#[cd::relaxed(privatized(p = 4, p = 8))]
fn twice(p: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

#[cd::relaxed(preserve(p), private(p = 4))]
fn preserved_and_private(p: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

#[cd::relaxed(preserve(p = 4), privatized(p = 4))]
fn preserved_and_privatized(p: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

struct Grid(GlobalPtr<f64>);

impl Grid {
    #[cd::relaxed(private(self = 4))]
    fn step(&self) -> Result<(), cd::CdError> {
        let _ = self.0;
        Ok(())
    }
}

#[cd::relaxed(private(a = 1))]
fn pattern((a, b): (GlobalPtr<f64>, usize)) -> Result<usize, cd::CdError> {
    let _ = a;
    Ok(b)
}

fn main() {}
