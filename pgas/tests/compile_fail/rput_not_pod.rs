// A struct that owns heap memory is not plain data: its bytes mean nothing on another rank.
use pgas::{GlobalPtr, rput};

#[derive(Clone, Copy)]
struct Particle {
    x: f64,
}

struct Named {
    name: String,
    mass: f64,
}

fn main() {
    let _ = Particle { x: 1.0 }.x;
    let p: GlobalPtr<Named> = GlobalPtr::null();
    let _ = rput(
        Named {
            name: "a".into(),
            mass: 1.0,
        },
        p,
    );
}
