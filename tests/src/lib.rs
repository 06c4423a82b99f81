//! Tests that span crates live in `tests/`; this library is empty.
