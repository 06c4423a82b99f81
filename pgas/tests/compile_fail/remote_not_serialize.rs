// The arguments of a remote function travel between ranks: they must be serde types.
struct Handle {
    fd: i32,
}

#[pgas::remote]
fn use_handle(h: Handle) -> i32 {
    h.fd
}

fn main() {
    let _ = pgas::rpc(0, use_handle, Handle { fd: 3 });
}
