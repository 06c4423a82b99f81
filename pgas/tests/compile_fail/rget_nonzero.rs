// A NonZeroU32 may not be 0, which a segment's bytes can be.
use std::num::NonZeroU32;

use pgas::{GlobalPtr, rget};

fn main() {
    let p: GlobalPtr<NonZeroU32> = GlobalPtr::null();
    let _ = rget(p);
}
