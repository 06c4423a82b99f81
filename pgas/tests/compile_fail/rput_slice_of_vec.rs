// A slice of Vecs cannot be put either: only the Vecs' pointers would travel.
use pgas::{GlobalPtr, rput_slice};

fn main() {
    let rows: Vec<Vec<f64>> = vec![vec![1.0; 4]; 2];
    let dst: GlobalPtr<Vec<f64>> = GlobalPtr::null();
    let _ = rput_slice(&rows, dst);
}
