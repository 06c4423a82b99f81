//! LULESH 2.0 port (in progress).
fn main() {
    eprintln!("lulesh: the port is in progress");
    std::process::exit(2);
}
