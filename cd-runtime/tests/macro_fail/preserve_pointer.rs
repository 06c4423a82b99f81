// preserve(x) of a parameter that holds a global pointer would preserve the pointer, not the
// cells it points to: refused, naming `x = len`. And `x = len` of a parameter that is not a
// pointer (a `GlobalPtr` or a `ViewPtr`).
use cd_runtime as cd;
use pgas::GlobalPtr;

#[cd::strict(preserve(u))]
fn pointer(u: GlobalPtr<f64>) -> Result<(), cd::CdError> {
    let _ = u;
    Ok(())
}

#[cd::strict(preserve(dir))]
fn directory(dir: &mut Vec<GlobalPtr<f64>>) -> Result<(), cd::CdError> {
    dir.push(GlobalPtr::null());
    Ok(())
}

#[cd::relaxed(preserve(p))]
fn relaxed(p: &mut GlobalPtr<u64>) -> Result<(), cd::CdError> {
    let _ = p;
    Ok(())
}

#[cd::strict(preserve(v))]
fn view_pointer(v: pgas::ViewPtr<f64>) -> Result<(), cd::CdError> {
    let _ = v;
    Ok(())
}

#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Halo {
    left: GlobalPtr<f64>,
    width: usize,
}

impl cd::HoldsGlobalPtr for Halo {}

#[cd::strict(preserve(h))]
fn holder(h: &mut Halo) -> Result<(), cd::CdError> {
    h.width += 1;
    Ok(())
}

#[cd::strict(preserve(v = 4))]
fn not_a_pointer(v: &mut [f64]) -> Result<(), cd::CdError> {
    v[0] = 1.0;
    Ok(())
}

fn main() {}
