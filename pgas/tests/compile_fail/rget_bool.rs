// A bool has 2 valid bit patterns of 256: bytes read from a segment may be any of them.
use pgas::{GlobalPtr, rget};

fn main() {
    let p: GlobalPtr<bool> = GlobalPtr::null();
    let _ = rget(p);
}
