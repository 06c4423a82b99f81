//! Tests that span crates live in `tests/`; this library holds what they share.

#![forbid(unsafe_code)]

pub mod import_graph;
