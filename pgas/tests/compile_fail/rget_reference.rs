// A reference is an address in one process: read from another rank's segment it would point
// anywhere.
use pgas::{GlobalPtr, rget};

static ANSWER: u64 = 42;

fn main() {
    let p: GlobalPtr<&'static u64> = GlobalPtr::null();
    let r: &'static u64 = rget(p).wait();
    assert_eq!(*r, ANSWER);
}
