// An rpc argument must be serializable: it is shipped to the target as bytes.
use pgas::{RpcTable, rpc};

struct Handle {
    fd: i32,
}

fn main() {
    let mut table = RpcTable::new();
    let f = table.register("use_handle", |h: Handle| h.fd);
    let _ = rpc(1, f, Handle { fd: 3 });
}
