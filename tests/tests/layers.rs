//! Every library crate of the workspace is in layers: no file imports, directly or through
//! others, a file that imports it back. A module that reaches up into a layer above closes such a
//! circle, and this test names the files and the lines that do it.

use integration_tests::import_graph::ImportGraph;
use std::fs;
use std::path::{Path, PathBuf};

const CRATES: &[&str] = &[
    "gasnet-bridge",
    "pgas",
    "cd-runtime",
    "cd-macros",
    "lulesh",
    "hpgmg",
    "bench-report",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The circles of the graph of the crate whose sources are under `src`, told file by file
/// with the lines that close them, or an empty text.
fn check(graph: &ImportGraph, src: &Path) -> String {
    let rel = |p: &Path| p.strip_prefix(src).unwrap_or(p).display().to_string();
    let mut text = String::new();
    for (files, edges) in graph.cycles() {
        text += &format!("  {} files import each other in a circle:\n", files.len());
        for e in edges {
            text += &format!("    {}:{} imports {}\n", rel(&e.from), e.line, rel(&e.to));
        }
    }
    text
}

#[test]
fn library_crates_have_no_import_cycles() {
    let root = workspace();
    let mut failures = String::new();
    for name in CRATES {
        let graph = ImportGraph::of_crate(&root.join(name).join("src/lib.rs")).unwrap();
        // The reader must have found the module tree, or no cycle could ever be seen.
        let multi_file = !matches!(*name, "cd-macros" | "bench-report");
        assert!(
            !multi_file || graph.files.len() > 5,
            "{name}: only {:?} read",
            graph.files
        );
        let wrong = check(&graph, &root.join(name).join("src"));
        if !wrong.is_empty() {
            failures += &format!("{name}:\n{wrong}");
        }
    }
    assert!(
        failures.is_empty(),
        "modules reach up into a layer above:\n{failures}"
    );
}

/// Writes a small crate into a fresh directory and returns the path of its `lib.rs`.
fn small_crate(files: &[(&str, &str)]) -> (tempdir::Dir, PathBuf) {
    let dir = tempdir::Dir::new();
    for (path, text) in files {
        let full = dir.0.join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    }
    let lib = dir.0.join("src/lib.rs");
    (dir, lib)
}

mod tempdir {
    /// A directory removed when dropped.
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!("layers-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn cycle_files(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let (dir, lib) = small_crate(files);
    let graph = ImportGraph::of_crate(&lib).unwrap();
    graph
        .cycles()
        .into_iter()
        .map(|(fs, _)| {
            fs.iter()
                .map(|f| f.strip_prefix(&dir.0).unwrap().display().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn a_module_reaching_up_through_a_facade_is_a_cycle() {
    let cycles = cycle_files(&[
        (
            "src/lib.rs",
            "pub mod low;\npub mod high;\npub use high::Driver;\n",
        ),
        (
            "src/low.rs",
            "use crate::Driver;\npub struct Cell;\nfn f(_: &Driver) {}\n",
        ),
        (
            "src/high.rs",
            "use crate::low::Cell;\npub struct Driver(Cell);\n",
        ),
    ]);
    assert_eq!(
        cycles,
        vec![vec!["src/high.rs".to_string(), "src/low.rs".to_string()]]
    );
}

#[test]
fn paths_in_code_nested_use_trees_and_reexports_count() {
    let cycles = cycle_files(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        (
            "src/a.rs",
            "use crate::{b::{self}};\npub fn x() { b::z(); }\n",
        ),
        ("src/b/mod.rs", "mod inner;\npub use inner::z;\n"),
        ("src/b/inner.rs", "pub fn z() { super::super::a::x(); }\n"),
    ]);
    // `b::z` is followed through the facade to the file that defines it.
    assert_eq!(
        cycles,
        vec![vec!["src/a.rs".to_string(), "src/b/inner.rs".to_string()]]
    );
}

#[test]
fn test_modules_comments_strings_and_macros_are_not_edges() {
    let cycles = cycle_files(&[
        (
            "src/lib.rs",
            "mod a;\nmod b;\n#[macro_export]\nmacro_rules! m { () => {} }\n",
        ),
        (
            "src/a.rs",
            "use crate::b::Thing;\n// crate::b uses crate::a::f\n\
             pub fn f() -> &'static str { \"super::b::c\" }\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b::setup;\n    fn t() { f(); setup(); }\n}\n",
        ),
        (
            "src/b.rs",
            "pub struct Thing;\npub fn setup() {}\nfn g() { crate::m!(); let _c = 'a'; }\n\
             #[cfg(test)]\nmod tests {\n    use crate::a::f;\n}\n",
        ),
    ]);
    assert!(cycles.is_empty(), "{cycles:?}");
}
