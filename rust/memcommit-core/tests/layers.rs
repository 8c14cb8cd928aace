//! The crate's modules depend one way: vfs <- ids <- format <- error <- recovery <- state <- search
//! <- persist <- engine <- tools (see lib.rs). This reads every `crate::` path in `src/` (outside comments
//! and unit-test modules, which may use the whole crate) and checks that none names a later
//! layer, that no module outside the engine and tools adds methods to `Log`, that the tools use
//! the engine through its methods (not its state), and that no two files depend on each other.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const LAYERS: &[&str] =
    &["vfs", "ids", "format", "error", "recovery", "state", "search", "persist", "engine", "tools"];

fn rank(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or_default();
    LAYERS.iter().position(|l| *l == top).unwrap_or_else(|| panic!("module {module} is in no layer"))
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/engine/log.rs` -> `engine::log`; `src/format/mod.rs` -> `format`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file without its unit tests and without comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// Every `crate::a::b::c` path in `code`, as its segments.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for piece in code.split("crate::").skip(1) {
        let mut segs = Vec::new();
        let mut rest = piece;
        loop {
            let end = rest.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(rest.len());
            if end == 0 {
                break;
            }
            segs.push(rest[..end].to_string());
            match rest[end..].strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.push(segs);
    }
    out
}

fn graph() -> BTreeMap<String, (BTreeSet<String>, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let texts: BTreeMap<String, String> = all
        .iter()
        .map(|f| (module_of(&src, f), fs::read_to_string(f).unwrap()))
        .filter(|(m, _)| m != "lib")
        .collect();
    let mut g = BTreeMap::new();
    for (m, text) in &texts {
        let code = code(text);
        let mut deps = BTreeSet::new();
        for segs in crate_paths(&code) {
            // The longest prefix of the path that is a module file.
            let target = (1..=segs.len()).rev().map(|k| segs[..k].join("::")).find(|c| texts.contains_key(c));
            if let Some(t) = target {
                if &t != m && !m.starts_with(&format!("{t}::")) {
                    deps.insert(t);
                }
            }
        }
        g.insert(m.clone(), (deps, code));
    }
    g
}

#[test]
fn no_module_names_a_later_layer() {
    let mut backwards = Vec::new();
    for (m, (deps, _)) in graph() {
        for d in deps {
            if rank(&d) > rank(&m) {
                backwards.push(format!("{m} -> {d}"));
            }
        }
    }
    assert!(backwards.is_empty(), "dependencies against the layering: {backwards:?}");
}

#[test]
fn only_the_engine_and_tools_add_methods_to_log() {
    let lower: Vec<String> = graph()
        .into_iter()
        .filter(|(m, (_, code))| rank(m) < rank("engine") && code.lines().any(|l| l.starts_with("impl Log ")))
        .map(|(m, _)| m)
        .collect();
    assert!(lower.is_empty(), "impl Log below the engine: {lower:?}");
}

#[test]
fn the_tools_use_the_engine_through_its_methods() {
    let reaching: Vec<String> = graph()
        .into_iter()
        .filter(|(m, (deps, _))| rank(m) == rank("tools") && deps.contains("engine::state"))
        .map(|(m, _)| m)
        .collect();
    assert!(reaching.is_empty(), "tools naming the engine's state: {reaching:?}");
    // The check must see a tool's engine dependencies, or it passes vacuously.
    assert!(graph()["tools::compact"].0.contains("engine::log"));
}

#[test]
fn no_two_files_depend_on_each_other() {
    let g = graph();
    // Depth-first search for a back edge; `path` is the current chain of modules.
    fn visit(
        m: &str,
        g: &BTreeMap<String, (BTreeSet<String>, String)>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for d in &g[m].0 {
            if let Some(c) = visit(d, g, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        let cycle = visit(m, &g, &mut done, &mut Vec::new());
        assert!(cycle.is_none(), "a dependency cycle: {}", cycle.unwrap_or_default().join(" -> "));
    }
}

#[test]
fn the_checker_sees_paths() {
    // The parser must find what a `use` line names, or the tests above pass vacuously.
    let paths = crate_paths("use crate::engine::log::{Log, Options};\nlet x = crate::format::hex(b);");
    assert_eq!(paths, vec![vec!["engine", "log"], vec!["format", "hex"]]);
    let g = graph();
    assert!(g["engine::log"].0.contains("engine::state"), "{:?}", g["engine::log"].0);
    assert!(g["recovery::verify"].0.contains("format::seal"), "{:?}", g["recovery::verify"].0);
}

/// Every file operation goes through the file layer (`vfs`), so that the simulated file system
/// of the fault tests sees all of them: no other module opens, syncs, renames or removes a
/// file itself.
#[test]
fn only_the_file_layer_touches_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let banned = [
        "std::fs",
        "fs::",
        "OpenOptions",
        "FileExt",
        "File::open",
        "File::create",
        "libc::fsync",
        "libc::fdatasync",
        "libc::fcntl",
        "libc::open",
        "sync_file_range",
    ];
    // `b` in `text` as a path of its own (`fs::` but not `vfs::`).
    let names = |text: &str, b: &str| {
        text.match_indices(b)
            .any(|(at, _)| !text[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
    };
    let mut offences = Vec::new();
    for f in &all {
        let module = module_of(&src, f);
        if module == "vfs" || module.starts_with("vfs::") {
            continue;
        }
        let text = code(&fs::read_to_string(f).unwrap());
        for b in banned {
            if names(&text, b) {
                offences.push(format!("{module} uses {b}"));
            }
        }
    }
    assert!(offences.is_empty(), "file operations outside the file layer: {offences:#?}");
}
