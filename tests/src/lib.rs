//! Tests that span crates live in `tests/`; this library holds what they share.

pub mod import_graph;
