//! Type errors a pgas program must get at compile time, with a readable message: transfers of
//! types that are not plain data, rpc arguments that cannot be serialized.
//! Regenerate the expected messages with `TRYBUILD=overwrite cargo test -p pgas --test compile_fail`.

#[test]
fn misuse_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
}
