// Type errors: a preserved type that is neither Preservable nor a slice of Pod, and a non-Copy
// argument taken by value and moved out of the body (the body runs in an FnMut closure).
use cd_runtime as cd;

struct Mesh {
    nodes: Vec<f64>,
}

#[cd::strict(preserve(m))]
fn step(m: &mut Mesh) -> Result<f64, cd::CdError> {
    Ok(m.nodes[0])
}

#[cd::strict]
fn consume(v: Vec<f64>) -> Result<Vec<f64>, cd::CdError> {
    Ok(v)
}

fn main() {}
