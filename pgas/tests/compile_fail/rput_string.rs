// A String owns heap memory of this process: its bytes mean nothing on another rank.
use pgas::{GlobalPtr, rput};

fn main() {
    let p: GlobalPtr<String> = GlobalPtr::null();
    let _ = rput(String::from("text"), p);
}
