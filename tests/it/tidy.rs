//! Tidy checks over the source tree, in the manner of rust-analyzer's `tidy.rs`: the layering of
//! ARCHITECTURE.md, the faces' distance from session state, module docs and file sizes.
//!
//! They read the sources as text. That is crude but cheap, and it is enough for rules that are
//! about which names a file mentions; a rule that needs types belongs in the compiler (the
//! `[lints]` table of Cargo.toml) instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir` (relative to the repository), skipping build output and npm
/// trees, sorted so that failures list files in a stable order.
fn rust_files(dir: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name == "target" || name == "node_modules" || name == ".git" {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo().join(dir), &mut out);
    out.sort();
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The file's text without its unit tests: everything from the first `#[cfg(test)]` on (the
/// test module closes each file by convention) and whole files that are test modules.
fn non_test_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    // Unit-test modules: `tests.rs`, or every file of a `tests/` folder inside `src/`.
    let in_tests_folder = path
        .strip_prefix(repo().join("src"))
        .is_ok_and(|inside| inside.components().any(|c| c.as_os_str() == "tests"));
    if in_tests_folder || path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// The top-level module a file of `src/` belongs to (`engine` for `src/engine/turn.rs`, `cli`
/// for `src/cli.rs`).
fn top_module(path: &Path) -> String {
    let inside = path.strip_prefix(repo().join("src")).unwrap();
    let first = inside.components().next().unwrap().as_os_str();
    first.to_string_lossy().trim_end_matches(".rs").to_owned()
}

/// The layers of ARCHITECTURE.md's map, top first. A module may use modules of lower layers
/// only; modules of one layer do not use each other. `lib` and `main` wire everything up.
const LAYERS: &[&[&str]] = &[
    &["server", "acp", "lsp", "cli"],
    &["session"],
    &["engine"],
    &["permissions", "providers", "store", "mcp", "hooks"],
    &["config"],
    &["tools"],
    &["workspace", "protocol"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// `crate::<module>` names a file uses (outside its unit tests).
fn crate_uses(text: &str) -> BTreeSet<String> {
    let mut uses = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // `$crate::` in macros and `::tandem::` paths are not this crate's module graph.
        let before = &rest[..at];
        if !before.ends_with('$') && !name.is_empty() {
            uses.insert(name);
        }
        rest = after;
    }
    uses
}

#[test]
fn dependencies_point_down_the_layers_of_architecture_md() {
    let mut wrong = Vec::new();
    let mut seen_modules = BTreeSet::new();
    for path in rust_files("src") {
        let module = top_module(&path);
        if module == "lib" || module == "main" {
            continue;
        }
        seen_modules.insert(module.clone());
        let Some(own) = layer_of(&module) else {
            wrong.push(format!(
                "{}: module `{module}` is in no layer of LAYERS (tests/it/tidy.rs); add it where ARCHITECTURE.md draws it",
                relative(&path)
            ));
            continue;
        };
        for used in crate_uses(&non_test_text(&path)) {
            if used == module {
                continue;
            }
            match layer_of(&used) {
                Some(layer) if layer > own => {}
                Some(_) => wrong.push(format!(
                    "{}: `{module}` uses `crate::{used}`, which is not below it",
                    relative(&path)
                )),
                None => wrong.push(format!(
                    "{}: `crate::{used}` is in no layer of LAYERS",
                    relative(&path)
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    // The table names nothing that does not exist (a renamed module must be renamed here too).
    for layer in LAYERS {
        for module in *layer {
            assert!(
                seen_modules.contains(*module),
                "LAYERS names `{module}`, which is no module of src/"
            );
        }
    }
}

/// The faces translate; they never reach into a conversation's state or pending requests.
#[test]
fn no_face_takes_a_session_lock() {
    let faces: Vec<PathBuf> = ["src/server", "src/acp", "src/lsp"]
        .iter()
        .flat_map(|d| rust_files(d))
        .chain([repo().join("src/cli.rs")])
        .collect();
    let mut wrong = Vec::new();
    for path in faces {
        let text = non_test_text(&path);
        for (number, line) in text.lines().enumerate() {
            let reaches_in = [".shared.state", ".shared.pending", "session::lock"]
                .iter()
                .any(|needle| names(line, needle));
            if reaches_in {
                wrong.push(format!(
                    "{}:{}: {}",
                    relative(&path),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a face reads session state itself; ask the conversation (engine::conversation) instead:\n{}",
        wrong.join("\n")
    );
}

/// The conversation's state changes only through its transitions: `ConversationState`'s
/// fields and `Conversation`'s `state` and `pending` stay private to `engine/conversation/`, so
/// the turn loop, the session actor and the faces cannot change fields that belong together
/// one at a time (the compiler enforces the privacy; this test keeps anyone from lifting it).
#[test]
fn the_conversation_state_is_private_to_its_module() {
    let text = non_test_text(&repo().join("src/engine/conversation/mod.rs"));
    let body_of = |header: &str| -> String {
        let start = text
            .find(header)
            .unwrap_or_else(|| panic!("`{header}` is gone from engine/conversation/mod.rs"));
        let rest = &text[start..];
        rest[..rest.find("\n}\n").unwrap_or(rest.len())].to_owned()
    };
    let mut wrong = Vec::new();
    for line in body_of("pub struct ConversationState {").lines().skip(1) {
        if line.trim_start().starts_with("pub") {
            wrong.push(format!("ConversationState: {}", line.trim()));
        }
    }
    for line in body_of("pub struct Conversation {").lines().skip(1) {
        let field = line.trim_start();
        if field.starts_with("pub") && (field.contains(" state:") || field.contains(" pending:")) {
            wrong.push(format!("Conversation: {field}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "the conversation's state is opened beyond engine/conversation/; add a transition or a query method there instead:\n{}",
        wrong.join("\n")
    );
}

/// The names a file takes from `crate::protocol`: `protocol::Name` paths and the members of
/// `use crate::protocol::{...}` groups (`self` and nested paths skipped).
fn protocol_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in text.match_indices("protocol::") {
        let rest = &text[at + "protocol::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            for member in inner.split(',') {
                let member = member.trim();
                if !member.is_empty() && member != "self" && !member.contains("::") {
                    names.insert(ident(member));
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// The engine's vocabulary in `protocol/`: what `protocol/event.rs` and `protocol/checkpoint.rs`
/// define, plus the leaf enums and helpers the engine decides with. Everything else there
/// (method params and results, the envelope) belongs to the native face. The checkpoint shapes
/// are vocabulary because both faces answer with them as they are (the native methods and
/// ACP's `_turn/diff`, `_session/rewind`, `_session/checkpoints` extensions).
const ENGINE_PROTOCOL_EXTRAS: &[&str] = &[
    "Mode",
    "UnknownMode",
    "Decision",
    "ErrorKind",
    "arguments_digest",
    "canonical_json",
    "fit",
];

/// `engine/display.rs` builds the `session/load` entries the store keeps per message, which are
/// the native wire's display shape by design (a resume copies them into the reply unparsed).
const ENGINE_FILES_ON_THE_WIRE: &[&str] = &["src/engine/display.rs"];

#[test]
fn the_engine_takes_only_its_vocabulary_from_the_protocol() {
    let event_rs = std::fs::read_to_string(repo().join("src/protocol/event.rs")).unwrap()
        + &std::fs::read_to_string(repo().join("src/protocol/checkpoint.rs")).unwrap();
    let mut allowed: BTreeSet<String> = ENGINE_PROTOCOL_EXTRAS
        .iter()
        .map(|s| s.to_string())
        .collect();
    for line in event_rs.lines() {
        for item in ["pub enum ", "pub struct ", "pub fn ", "pub const "] {
            if let Some(rest) = line.strip_prefix(item) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                allowed.insert(name);
            }
        }
    }
    assert!(allowed.contains("Event"), "event.rs defines Event");
    let mut wrong = Vec::new();
    for path in rust_files("src/engine") {
        let name = relative(&path);
        if ENGINE_FILES_ON_THE_WIRE.contains(&name.as_str()) {
            continue;
        }
        let text = non_test_text(&path);
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        if code.contains("protocol as ") {
            wrong.push(format!(
                "{name}: renames crate::protocol, which hides what it takes from it"
            ));
        }
        for used in protocol_names(&code) {
            if !allowed.contains(&used) {
                wrong.push(format!(
                    "{name}: uses protocol::{used}, a wire type of the native face"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Whether `line` names `path` whole (`.shared.pending` but not `.shared.pending_payloads`).
fn names(line: &str, path: &str) -> bool {
    line.match_indices(path).any(|(at, _)| {
        !line[at + path.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let mut missing = Vec::new();
    for dir in ["src", "tests", "examples", "fuzz", "crates"] {
        for path in rust_files(dir) {
            let text = std::fs::read_to_string(&path).unwrap();
            if !text.starts_with("//!") {
                missing.push(relative(&path));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "these files do not open with a `//!` line saying what they are:\n{}",
        missing.join("\n")
    );
}

/// The line count files of `src/` stay under, and the files that are over it with the count
/// they may not grow past. The renovation (issue 24) split every one of them, so the list is
/// empty; it only ever shrinks, and a file that gets under the limit must leave it.
const MAX_LINES: usize = 800;
const OVER_MAX_LINES: &[(&str, usize)] = &[];

#[test]
fn no_source_file_grows_past_its_line_limit() {
    let allowed: BTreeMap<&str, usize> = OVER_MAX_LINES.iter().copied().collect();
    let mut wrong = Vec::new();
    for path in rust_files("src") {
        let name = relative(&path);
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        match allowed.get(name.as_str()) {
            Some(&ceiling) if lines > ceiling => wrong.push(format!(
                "{name}: {lines} lines, over its ceiling of {ceiling}: split it instead of growing it"
            )),
            Some(_) if lines <= MAX_LINES => wrong.push(format!(
                "{name}: {lines} lines, now under {MAX_LINES}: remove it from OVER_MAX_LINES"
            )),
            Some(_) => {}
            None if lines > MAX_LINES => wrong.push(format!(
                "{name}: {lines} lines, over {MAX_LINES}: split it by subject"
            )),
            None => {}
        }
    }
    for (name, _) in OVER_MAX_LINES {
        assert!(
            repo().join(name).is_file(),
            "OVER_MAX_LINES names {name}, which does not exist: remove it"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn names_matches_whole_paths_only() {
    assert!(names("lock(&h.shared.pending);", ".shared.pending"));
    assert!(names("x.shared.pending", ".shared.pending"));
    assert!(!names("h.shared.pending_payloads()", ".shared.pending"));
}

#[test]
fn protocol_names_reads_paths_and_use_groups() {
    let names = protocol_names(
        "use crate::protocol::{self, Decision, Event,\n    ToolKind};\nlet x = protocol::fit::cut();",
    );
    assert_eq!(
        names,
        ["Decision", "Event", "ToolKind", "fit"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

#[test]
fn crate_uses_finds_module_names_and_skips_macro_paths() {
    let uses =
        crate_uses("use crate::engine::turn;\nlet x = $crate::y;\ncrate::store::Store::open()");
    assert_eq!(
        uses,
        ["engine", "store"].iter().map(|s| s.to_string()).collect()
    );
}
