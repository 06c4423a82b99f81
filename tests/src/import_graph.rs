//! The file-level import graph of a library crate, read from its sources: which file's code names
//! an item of which other file. A crate is in layers when this graph has no cycle.
//!
//! It reads Rust the way the compiler resolves module paths, for the subset the workspace uses:
//! `mod` declarations (inline or in files), `use` trees with `crate`, `super`, `self`, child
//! modules and module aliases, re-exports followed to the file that defines the item, and paths
//! written in code. Comments and string literals are skipped. A macro call (`crate::m!`) is not an
//! edge: `#[macro_export]` puts every macro at the crate root whatever file defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// One module of the crate: the file that holds it and what it names.
#[derive(Debug, Default)]
struct Module {
    file: PathBuf,
    /// Child modules by name.
    children: BTreeSet<String>,
    /// `use` leaves: local name → full path as written (relative to this module).
    imports: Vec<UseLeaf>,
    /// Paths written in code outside `use` items, with their line.
    code_paths: Vec<(Vec<String>, usize)>,
}

#[derive(Debug, Clone)]
struct UseLeaf {
    path: Vec<String>,
    /// The name it binds (`None` for a glob).
    alias: Option<String>,
    line: usize,
}

/// An import of `to` by `from`, with the first line that makes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: PathBuf,
    pub to: PathBuf,
    pub line: usize,
}

/// The files of one crate and the imports between them.
#[derive(Debug)]
pub struct ImportGraph {
    pub files: BTreeSet<PathBuf>,
    pub edges: Vec<Edge>,
}

impl ImportGraph {
    /// Reads the crate whose root file is `root` (its `src/lib.rs`).
    pub fn of_crate(root: &Path) -> Result<ImportGraph, String> {
        let mut modules = BTreeMap::new();
        load_module(root, Vec::new(), true, &mut modules)?;
        let mut edges: BTreeMap<(PathBuf, PathBuf), usize> = BTreeMap::new();
        for (path, module) in &modules {
            let mut add = |target: Option<Target>, line: usize| {
                if let Some(target) = target {
                    let to = modules[&target.module].file.clone();
                    if to != module.file {
                        let e = edges.entry((module.file.clone(), to)).or_insert(line);
                        *e = (*e).min(line);
                    }
                }
            };
            for leaf in &module.imports {
                // Naming a module (`use crate::a;`) is not yet using it: the paths through the
                // name are. A glob takes all of the module's items.
                let target = resolve(&modules, path, &leaf.path, 0);
                let names_module = target.as_ref().is_some_and(|t| t.is_module);
                add(
                    target.filter(|_| !names_module || leaf.alias.is_none()),
                    leaf.line,
                );
            }
            for (p, line) in &module.code_paths {
                add(resolve(&modules, path, p, 0), *line);
            }
        }
        Ok(ImportGraph {
            files: modules.values().map(|m| m.file.clone()).collect(),
            edges: edges
                .into_iter()
                .map(|((from, to), line)| Edge { from, to, line })
                .collect(),
        })
    }

    /// The groups of files that import each other in a circle (strongly connected components of
    /// more than one file), each sorted, with the edges inside the group.
    pub fn cycles(&self) -> Vec<(Vec<PathBuf>, Vec<Edge>)> {
        let index: BTreeMap<&PathBuf, usize> =
            self.files.iter().enumerate().map(|(i, f)| (f, i)).collect();
        let files: Vec<&PathBuf> = self.files.iter().collect();
        let mut out = vec![Vec::new(); files.len()];
        for e in &self.edges {
            out[index[&e.from]].push(index[&e.to]);
        }
        let mut groups = Vec::new();
        for component in strongly_connected(&out) {
            if component.len() > 1 {
                let members: BTreeSet<usize> = component.iter().copied().collect();
                let inside = self
                    .edges
                    .iter()
                    .filter(|e| {
                        members.contains(&index[&e.from]) && members.contains(&index[&e.to])
                    })
                    .cloned()
                    .collect();
                let mut names: Vec<PathBuf> = members.iter().map(|&i| files[i].clone()).collect();
                names.sort();
                groups.push((names, inside));
            }
        }
        groups
    }
}

/// Tarjan's algorithm, iterative so that deep graphs cannot overflow the stack.
fn strongly_connected(out: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = out.len();
    let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut result, mut next) = (Vec::new(), Vec::new(), 0);
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut calls = vec![(start, 0usize)];
        while let Some(&mut (v, ref mut child)) = calls.last_mut() {
            if *child == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = out[v].get(*child) {
                *child += 1;
                if index[w] == usize::MAX {
                    calls.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                result.push(component);
            }
        }
    }
    result
}

/// What a path names: an item of a module, or the module itself.
#[derive(Debug, PartialEq)]
struct Target {
    module: ModPath,
    is_module: bool,
}

/// The module `start` names by `path`, following re-exports to the module that defines the item.
fn resolve(
    modules: &BTreeMap<ModPath, Module>,
    start: &ModPath,
    path: &[String],
    depth: usize,
) -> Option<Target> {
    if depth > 16 || path.is_empty() {
        return None;
    }
    let module = &modules[start];
    let (mut at, rest): (ModPath, &[String]) = match path[0].as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (start.clone(), &path[1..]),
        "super" => {
            let mut at = start.clone();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                at.pop()?;
                rest = &rest[1..];
            }
            (at, rest)
        }
        first if module.children.contains(first) => {
            let mut at = start.clone();
            at.push(first.to_string());
            (at, &path[1..])
        }
        first => {
            // A name this module imported: a module alias, or an item (then the path names
            // something inside the item, e.g. an enum variant, and the edge is the item's).
            let leaf = module
                .imports
                .iter()
                .find(|l| l.alias.as_deref() == Some(first))?;
            let mut full = leaf.path.clone();
            full.extend_from_slice(&path[1..]);
            return resolve(modules, start, &full, depth + 1);
        }
    };
    let mut rest = rest;
    while let Some(seg) = rest.first() {
        let mut child = at.clone();
        child.push(seg.clone());
        if modules.contains_key(&child) {
            at = child;
            rest = &rest[1..];
        } else {
            break;
        }
    }
    if let Some(item) = rest.first() {
        // Follow an import of `item` into `at` (a facade's re-export, or a private import that
        // the module's descendants may name through `super::`) to where it is defined.
        let holder = &modules[&at];
        let named = holder
            .imports
            .iter()
            .find(|l| l.alias.as_deref() == Some(item));
        if let Some(leaf) = named {
            let mut full = leaf.path.clone();
            full.extend_from_slice(&rest[1..]);
            return resolve(modules, &at, &full, depth + 1).or(Some(Target {
                module: at,
                is_module: false,
            }));
        }
        for glob in holder.imports.iter().filter(|l| l.alias.is_none()) {
            let mut full = glob.path.clone();
            full.extend_from_slice(rest);
            if let Some(found) = resolve(modules, &at, &full, depth + 1) {
                if found.module != at && defines_or_reexports(modules, &found.module, item) {
                    return Some(found);
                }
            }
        }
    }
    Some(Target {
        is_module: rest.is_empty(),
        module: at,
    })
}

/// Whether `module` can be where `item` comes from: it names it in a re-export, or its source
/// declares something of that name.
fn defines_or_reexports(modules: &BTreeMap<ModPath, Module>, module: &ModPath, item: &str) -> bool {
    let m = &modules[module];
    m.imports.iter().any(|l| l.alias.as_deref() == Some(item))
        || fs::read_to_string(&m.file).is_ok_and(|src| declares(&src, item))
}

fn declares(src: &str, item: &str) -> bool {
    let code = strip(src);
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).any(|w| {
        w[1] == item
            && matches!(
                w[0],
                "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
            )
    })
}

/// Reads the module in `file` and, recursively, the modules it declares.
fn load_module(
    file: &Path,
    path: ModPath,
    dir_owner: bool,
    modules: &mut BTreeMap<ModPath, Module>,
) -> Result<(), String> {
    let src = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let code = strip(&src);
    let tokens = tokenize(&code);
    let dir = if dir_owner {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    let mut module = Module {
        file: file.to_path_buf(),
        ..Module::default()
    };
    let mut file_children = Vec::new();
    // Ends (token indices) of the inline modules around the current token: inside one, a leading
    // `super` means the file's module, not its parent.
    let mut inline_ends: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        inline_ends.retain(|&end| end > i);
        let inline = inline_ends.len();
        let (tok, line) = (&tokens[i].0, tokens[i].1);
        match tok.as_str() {
            "mod" if tokens.get(i + 1).is_some_and(|t| is_ident(&t.0)) => {
                let name = tokens[i + 1].0.clone();
                if tokens.get(i + 2).map(|t| t.0.as_str()) == Some(";") {
                    module.children.insert(name.clone());
                    file_children.push(name);
                    i += 3;
                } else if tokens.get(i + 2).map(|t| t.0.as_str()) == Some("{") {
                    let end = matching_brace(&tokens, i + 2);
                    if after_cfg_test(&tokens, i) {
                        // Unit tests may set up with any layer of the crate: not the crate's
                        // structure.
                        i = end + 1;
                    } else {
                        // An inline module: its items count as this file's.
                        inline_ends.push(end);
                        i += 2;
                    }
                } else {
                    i += 2;
                }
            }
            "use" => {
                let end = tokens[i..]
                    .iter()
                    .position(|t| t.0 == ";")
                    .map_or(tokens.len(), |p| i + p);
                let mut leaves = Vec::new();
                parse_use_tree(&tokens[i + 1..end], &mut Vec::new(), &mut leaves);
                for (path, alias) in leaves {
                    let path = outside_inline(path, inline);
                    module.imports.push(UseLeaf { path, alias, line });
                }
                i = end + 1;
            }
            _ => {
                if is_ident(tok) && tokens.get(i + 1).is_some_and(|t| t.0 == "::") {
                    let mut segs = vec![tok.clone()];
                    let mut j = i + 1;
                    while tokens.get(j).is_some_and(|t| t.0 == "::")
                        && tokens.get(j + 1).is_some_and(|t| is_ident(&t.0))
                    {
                        segs.push(tokens[j + 1].0.clone());
                        j += 2;
                    }
                    let is_macro = tokens.get(j).is_some_and(|t| t.0 == "!");
                    let after_colons = i > 0 && tokens[i - 1].0 == "::";
                    if !is_macro && !after_colons {
                        module.code_paths.push((outside_inline(segs, inline), line));
                    }
                    i = j;
                } else {
                    i += 1;
                }
            }
        }
    }
    modules.insert(path.clone(), module);
    for name in file_children {
        let flat = dir.join(format!("{name}.rs"));
        let nested = dir.join(&name).join("mod.rs");
        let (child_file, owner) = if flat.exists() {
            (flat, false)
        } else if nested.exists() {
            (nested, true)
        } else {
            return Err(format!("{}: module {name} has no file", file.display()));
        };
        let mut child_path = path.clone();
        child_path.push(name);
        load_module(&child_file, child_path, owner, modules)?;
    }
    Ok(())
}

/// Whether the `mod` at `at` (after an optional visibility) is under `#[cfg(test)]`.
fn after_cfg_test(tokens: &[(String, usize)], at: usize) -> bool {
    let mut k = at;
    if k > 0 && tokens[k - 1].0 == "pub" {
        k -= 1;
    }
    let attr = ["#", "[", "cfg", "(", "test", ")", "]"];
    k >= attr.len()
        && tokens[k - attr.len()..k]
            .iter()
            .map(|t| t.0.as_str())
            .eq(attr)
}

/// A path written `inline` inline modules deep, as seen from the file's module: each leading
/// `super` that only leaves an inline module is dropped.
fn outside_inline(mut path: Vec<String>, inline: usize) -> Vec<String> {
    let supers = path.iter().take_while(|s| *s == "super").count();
    let dropped = supers.min(inline);
    path.drain(..dropped);
    if dropped > 0 && dropped == supers {
        path.insert(0, "self".to_string());
    }
    path
}

/// Expands a `use` tree (the tokens between `use` and `;`) into its leaves.
fn parse_use_tree(
    tokens: &[(String, usize)],
    prefix: &mut Vec<String>,
    leaves: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut i = 0;
    let depth = prefix.len();
    while i < tokens.len() {
        let t = tokens[i].0.as_str();
        match t {
            "{" => {
                let close = matching_brace(tokens, i);
                for part in split_top_level(&tokens[i + 1..close]) {
                    parse_use_tree(part, prefix, leaves);
                }
                i = close + 1;
            }
            "*" => {
                leaves.push((prefix.clone(), None));
                i += 1;
            }
            "as" => {
                let alias = tokens.get(i + 1).map(|t| t.0.clone());
                if let Some(leaf) = leaves.last_mut() {
                    leaf.1 = alias.filter(|a| a != "_");
                }
                i += 2;
            }
            "::" => i += 1,
            name if is_ident(name) => {
                prefix.push(name.to_string());
                let next = tokens.get(i + 1).map(|t| t.0.as_str());
                if next != Some("::") {
                    let mut path = prefix.clone();
                    if name == "self" {
                        path.pop();
                    }
                    leaves.push((path.clone(), path.last().cloned()));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    prefix.truncate(depth);
}

fn matching_brace(tokens: &[(String, usize)], open: usize) -> usize {
    let mut depth = 0;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        match t.0.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    tokens.len() - 1
}

fn split_top_level(tokens: &[(String, usize)]) -> Vec<&[(String, usize)]> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (k, t) in tokens.iter().enumerate() {
        match t.0.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 0 => {
                parts.push(&tokens[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Identifiers, `::` and single punctuation characters, with their line.
fn tokenize(code: &str) -> Vec<(String, usize)> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            tokens.push((word.strip_prefix("r#").unwrap_or(&word).to_string(), line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push(("::".to_string(), line));
            i += 2;
        } else {
            tokens.push((c.to_string(), line));
            i += 1;
        }
    }
    tokens
}

/// The source with comments, string and character literals blanked (newlines kept, so that line
/// numbers stay right).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (c.get(i + 1) == Some(&'"')
                || (c.get(i + 1) == Some(&'#')
                    && c.get(i + 2).is_some_and(|&x| x == '"' || x == '#')))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            let mut hashes = 0;
            i += 1;
            while c.get(i) == Some(&'#') {
                hashes += 1;
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|h| c.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' {
            // A character literal, or a lifetime (which is kept: it holds no path).
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}
