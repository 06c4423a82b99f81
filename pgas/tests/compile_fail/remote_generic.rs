// A remote function is named by one path on every rank: a generic one has no single body.
#[pgas::remote]
fn identity<T>(x: T) -> T {
    x
}

fn main() {}
