// A char must be a Unicode scalar value: most 32-bit patterns are not one.
use pgas::{GlobalPtr, rget};

fn main() {
    let p: GlobalPtr<char> = GlobalPtr::null();
    let _ = rget(p);
}
