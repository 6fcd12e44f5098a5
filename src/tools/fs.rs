//! The synchronous file tools: read_file, list_dir, glob, grep, and the
//! plan/apply halves of write_file and edit_file.
//!
//! Everything here blocks; the engine runs these inside `spawn_blocking`.
//! Failures are returned as tool results for the model (`is_error`), never
//! as Rust errors, because a failed tool call must not fail the turn.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::{WalkBuilder, WalkState};

use crate::workspace::diff::{file_diff, unified_diff, FileDiff};
use crate::workspace::protected::{protected_reason, secret_reason};
use crate::workspace::{EntryKind, Workspace, WorkspaceError, WorkspacePath};

/// The result of one tool call, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub output: String,
    pub is_error: bool,
}

impl ToolOutcome {
    pub fn ok(output: impl Into<String>) -> ToolOutcome {
        ToolOutcome {
            output: output.into(),
            is_error: false,
        }
    }

    pub fn error(output: impl Into<String>) -> ToolOutcome {
        ToolOutcome {
            output: output.into(),
            is_error: true,
        }
    }
}

impl From<WorkspaceError> for ToolOutcome {
    fn from(err: WorkspaceError) -> ToolOutcome {
        ToolOutcome::error(err.to_string())
    }
}

/// Lines shown by read_file when the model gives no limit.
const READ_DEFAULT_LIMIT: u64 = 2000;
/// Longer lines are cut: minified files would otherwise flood the context.
const READ_MAX_LINE_CHARS: usize = 2000;
/// A second guard on read_file output size, for files of many long lines.
const READ_MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// How much of a file is checked for NUL bytes to call it binary.
const BINARY_SNIFF_BYTES: u64 = 8 * 1024;
const LIST_MAX_ENTRIES: usize = 1000;
const GLOB_MAX_RESULTS: usize = 1000;
const GREP_MAX_MATCHES: usize = 500;
const GREP_MAX_LINE_CHARS: usize = 200;
/// How much of the user-vs-proposed diff is echoed back to the model.
const OVERRIDE_DIFF_MAX_LINES: usize = 60;

// ---------------------------------------------------------------------------
// read_file

/// Reads a text file with `cat -n` style line numbers. `offset` is the
/// 1-based first line, `limit` the number of lines (default 2000).
pub fn read_file(
    ws: &Workspace,
    path: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> ToolOutcome {
    match read_file_inner(ws, path, offset, limit) {
        Ok(outcome) => outcome,
        Err(err) => err.into(),
    }
}

fn read_file_inner(
    ws: &Workspace,
    path: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> Result<ToolOutcome, WorkspaceError> {
    let p = ws.resolve(path)?;
    let mut file = ws.open_file(&p)?;
    let mut head = Vec::new();
    (&mut file)
        .take(BINARY_SNIFF_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| ws.map_io(&p, "read", e))?;
    if head.contains(&0) {
        return Ok(ToolOutcome::error(format!(
            "`{}` looks like a binary file (it contains NUL bytes); read_file only shows text, so use the shell tool (for example `xxd` or `file`) to inspect it",
            p.display
        )));
    }

    // Streaming keeps memory flat for large files: only the requested window
    // is kept, the rest is just counted.
    let reader = BufReader::new(Cursor::new(head).chain(file));
    number_lines(&p.display, reader, offset, limit).map_err(|e| ws.map_io(&p, "read", e))
}

/// Formats text the client's editor supplied (an unsaved buffer, through ACP's
/// `fs/read_text_file`) exactly like read_file formats a file on disk.
pub fn read_text_window(
    display: &str,
    text: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> ToolOutcome {
    if text.contains('\0') {
        return ToolOutcome::error(format!(
            "`{display}` looks like a binary file (it contains NUL bytes); read_file only shows text, so use the shell tool (for example `xxd` or `file`) to inspect it"
        ));
    }
    number_lines(display, Cursor::new(text.as_bytes()), offset, limit)
        .unwrap_or_else(|e| ToolOutcome::error(format!("could not read `{display}`: {e}")))
}

/// How far past the shown window read_file keeps counting lines for its "more lines" note;
/// beyond it the note says there is more without a count (a 1.5 GB file is not scanned whole
/// to answer a slice).
const READ_COUNT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// What one call of [`read_line_capped`] found.
struct LineRead {
    /// Bytes consumed from the reader, newline included; 0 at the end.
    consumed: u64,
    /// Whether the line had more than the kept bytes.
    cut: bool,
}

/// Reads one line, keeping at most `keep` bytes of it in `line` (nothing when `keep` is 0)
/// and skipping the rest up to the newline, so a line of any length costs only the buffer.
fn read_line_capped(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    keep: usize,
) -> std::io::Result<LineRead> {
    line.clear();
    let mut consumed = 0u64;
    let mut cut = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let (piece, done) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        let room = keep.saturating_sub(line.len());
        if piece.len() > room {
            cut |= piece[room..].iter().any(|&b| b != b'\n' && b != b'\r');
        }
        line.extend_from_slice(&piece[..piece.len().min(room)]);
        let used = piece.len();
        reader.consume(used);
        consumed += used as u64;
        if done {
            break;
        }
    }
    Ok(LineRead { consumed, cut })
}

/// The `cat -n` window of read_file over any reader. Lines are read with a cap
/// ([`read_line_capped`]): memory stays at the window's size whatever the file holds.
fn number_lines(
    display: &str,
    mut reader: impl BufRead,
    offset: Option<u64>,
    limit: Option<u64>,
) -> std::io::Result<ToolOutcome> {
    let first = offset.unwrap_or(1).max(1);
    let limit = limit.unwrap_or(READ_DEFAULT_LIMIT).max(1);
    // Four bytes per character at most, plus a character cut in half, so the character cap
    // below always decides and the kept bytes never fall short of it.
    let keep_bytes = READ_MAX_LINE_CHARS * 4 + 4;
    let mut out = String::new();
    let mut line = Vec::new();
    let mut line_no: u64 = 0;
    let mut shown: u64 = 0;
    let mut last_shown: u64 = 0;
    let mut remaining: u64 = 0;
    let mut counted_bytes: u64 = 0;
    let mut uncounted = false;
    let mut cut_lines = false;
    let mut lossy = false;
    loop {
        let showing = line_no + 1 >= first && shown < limit && out.len() < READ_MAX_OUTPUT_BYTES;
        let read = read_line_capped(&mut reader, &mut line, if showing { keep_bytes } else { 0 })?;
        if read.consumed == 0 {
            break;
        }
        line_no += 1;
        if line_no < first {
            continue;
        }
        if !showing {
            remaining += 1;
            counted_bytes += read.consumed;
            if counted_bytes > READ_COUNT_MAX_BYTES {
                uncounted = true;
                break;
            }
            continue;
        }
        let bytes = trim_newline(&line);
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            // A multi-byte character cut by the byte cap is not a sign of a non-UTF-8 file.
            Err(e) if read.cut && e.error_len().is_none() => std::borrow::Cow::Borrowed(
                std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or(""),
            ),
            Err(_) => {
                lossy = true;
                String::from_utf8_lossy(bytes)
            }
        };
        let (text, cut_chars) = truncate_chars(&text, READ_MAX_LINE_CHARS);
        let was_cut = cut_chars || read.cut;
        cut_lines |= was_cut;
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("{line_no:>6}\t{text}"));
        if was_cut {
            out.push_str(" … [line truncated]");
        }
        shown += 1;
        last_shown = line_no;
    }

    if line_no == 0 {
        return Ok(ToolOutcome::ok(format!("`{display}` is empty.")));
    }
    if shown == 0 {
        return Ok(ToolOutcome::error(format!(
            "`{display}` has {line_no} lines; offset {first} is past the end. Call read_file with a smaller offset."
        )));
    }
    let mut notes = Vec::new();
    if cut_lines {
        notes.push(format!(
            "Lines longer than {READ_MAX_LINE_CHARS} characters were truncated; use grep or the shell tool (for example `cut -c`) to see the rest of a long line."
        ));
    }
    if lossy {
        notes.push(
            "The file is not valid UTF-8; invalid bytes are shown as U+FFFD, and edit_file cannot change it."
                .to_string(),
        );
    }
    if uncounted {
        notes.push(format!(
            "… more lines (over {} MiB more; not counted); call read_file with offset={}",
            READ_COUNT_MAX_BYTES / (1024 * 1024),
            last_shown + 1
        ));
    } else if remaining > 0 {
        notes.push(format!(
            "… {remaining} more lines; call read_file with offset={}",
            last_shown + 1
        ));
    }
    for note in notes {
        out.push_str("\n\n");
        out.push_str(&note);
    }
    Ok(ToolOutcome::ok(out))
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Cuts `text` to at most `max` characters; says whether it cut.
fn truncate_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((byte_index, _)) => (&text[..byte_index], true),
        None => (text, false),
    }
}

// ---------------------------------------------------------------------------
// list_dir

/// Lists a directory, one entry per line, directories with a trailing '/'.
pub fn list_dir(ws: &Workspace, path: &str) -> ToolOutcome {
    let p = match ws.resolve(path) {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    let entries = match ws.list_dir(&p) {
        Ok(entries) => entries,
        Err(e) => return e.into(),
    };
    if entries.is_empty() {
        return ToolOutcome::ok(format!("`{}` is an empty directory.", p.display));
    }
    let total = entries.len();
    let mut out: Vec<String> = entries
        .iter()
        .take(LIST_MAX_ENTRIES)
        .map(|e| match e.kind {
            EntryKind::Dir => format!("{}/", e.name),
            EntryKind::Symlink => format!("{} (symlink)", e.name),
            EntryKind::File | EntryKind::Other => e.name.clone(),
        })
        .collect();
    if total > LIST_MAX_ENTRIES {
        out.push(format!(
            "\n… {} more entries not shown ({total} in total); use glob with a pattern to narrow the listing",
            total - LIST_MAX_ENTRIES
        ));
    }
    ToolOutcome::ok(out.join("\n"))
}

// ---------------------------------------------------------------------------
// Search roots shared by glob and grep

/// Where a glob or grep search starts, already checked by the kernel.
struct SearchRoot {
    root_index: usize,
    /// Canonical path of the search start, relative to the root.
    relative: PathBuf,
    /// The same place as an absolute path, for the path-based walker.
    absolute: PathBuf,
    is_dir: bool,
    display: String,
}

fn search_root(ws: &Workspace, path: Option<&str>) -> Result<SearchRoot, WorkspaceError> {
    let p = ws.resolve(path.unwrap_or("."))?;
    // Canonicalizing through the root's handle makes the kernel refuse `..`
    // and symlinks that leave the root, and hands the walker a real
    // directory (it does not follow symlinks, not even at its start).
    let relative = ws.canonical_relative(&p)?;
    let dir = ws.root_dir(p.root_index);
    let start = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative.as_path()
    };
    let meta = dir
        .metadata(start)
        .map_err(|e| ws.map_io(&p, "inspect", e))?;
    let is_dir = meta.is_dir();
    if !is_dir && !meta.is_file() {
        return Err(WorkspaceError::NotAFile { path: p.display });
    }
    let absolute = ws.roots()[p.root_index].join(&relative);
    Ok(SearchRoot {
        root_index: p.root_index,
        relative,
        absolute,
        is_dir,
        display: p.display,
    })
}

/// A gitignore-aware walker that skips hidden files and `.git`, never
/// follows symlinks, and honours `.gitignore` even outside a git checkout.
fn walker(start: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(start);
    builder
        .hidden(true)
        .follow_links(false)
        .require_git(false)
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

fn compile_glob(pattern: &str) -> Result<GlobMatcher, String> {
    let trimmed = pattern.strip_prefix("./").unwrap_or(pattern);
    GlobBuilder::new(trimmed)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            format!(
                "invalid glob pattern `{pattern}`: {e}; use `*` within a directory, `**` across directories, e.g. `src/**/*.rs`"
            )
        })
}

// ---------------------------------------------------------------------------
// glob

/// Lists files whose path relative to the search directory matches
/// `pattern`. `*` does not cross '/', `**` does: `*.rs` matches only the top
/// level, `**/*.rs` matches at any depth.
pub fn glob(ws: &Workspace, pattern: &str, path: Option<&str>) -> ToolOutcome {
    let matcher = match compile_glob(pattern) {
        Ok(m) => m,
        Err(e) => return ToolOutcome::error(e),
    };
    let root = match search_root(ws, path) {
        Ok(root) => root,
        Err(e) => return e.into(),
    };
    if !root.is_dir {
        return ToolOutcome::error(format!(
            "`{}` is a file, not a directory; pass a directory as `path`, or use read_file",
            root.display
        ));
    }

    let found: Mutex<Vec<String>> = Mutex::new(Vec::new());
    walker(&root.absolute).build_parallel().run(|| {
        let root = &root;
        let matcher = &matcher;
        let found = &found;
        Box::new(move |entry| {
            // Unreadable directories are skipped rather than failing the
            // whole search; the rest of the tree is still useful.
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&root.absolute) else {
                return WalkState::Continue;
            };
            if matcher.is_match(rel) {
                let shown = ws.display_path(root.root_index, &root.relative.join(rel));
                if let Ok(mut found) = found.lock() {
                    found.push(shown);
                }
            }
            WalkState::Continue
        })
    });

    let mut found = match found.into_inner() {
        Ok(found) => found,
        Err(poisoned) => poisoned.into_inner(),
    };
    if found.is_empty() {
        return ToolOutcome::ok(format!(
            "No files match `{pattern}` in `{}` (hidden and gitignored files are skipped).",
            root.display
        ));
    }
    found.sort();
    let total = found.len();
    found.truncate(GLOB_MAX_RESULTS);
    let mut out = found.join("\n");
    if total > GLOB_MAX_RESULTS {
        out.push_str(&format!(
            "\n\n… {} more results not shown ({total} in total); use a narrower pattern or path",
            total - GLOB_MAX_RESULTS
        ));
    }
    ToolOutcome::ok(out)
}

// ---------------------------------------------------------------------------
// grep

/// One matching line. Ordered by path, then line, so a max-heap of them can
/// keep the first N in output order.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GrepMatch {
    path: String,
    line: u64,
    text: String,
}

/// Collects one file's matches; drops them all if the file turns out to be
/// binary partway through.
struct FileSink {
    matches: Vec<(u64, String)>,
    count: usize,
    binary: bool,
    cut_lines: bool,
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.count += 1;
        // Only the first N lines of a file can be among the first N lines of
        // the sorted output, so later ones are counted but not kept.
        if self.matches.len() < GREP_MAX_MATCHES {
            let text = String::from_utf8_lossy(trim_newline(mat.bytes()));
            let (text, cut) = truncate_chars(&text, GREP_MAX_LINE_CHARS);
            self.cut_lines |= cut;
            let text = if cut {
                format!("{text}…")
            } else {
                text.to_string()
            };
            self.matches.push((mat.line_number().unwrap_or(0), text));
        }
        Ok(true)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[derive(Default)]
struct GrepTotals {
    /// The smallest matches seen so far, at most `GREP_MAX_MATCHES`.
    best: BinaryHeap<GrepMatch>,
    total: usize,
    cut_lines: bool,
    unreadable: usize,
    /// Files skipped because they may hold secrets.
    secrets: usize,
}

/// Searches files for a regex, ripgrep style. `glob` filters files: without
/// a '/', it matches the file name at any depth (`*.rs`); with one, the path
/// relative to the search directory.
pub fn grep(ws: &Workspace, pattern: &str, path: Option<&str>, glob: Option<&str>) -> ToolOutcome {
    let matcher = match RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(pattern)
    {
        Ok(m) => m,
        Err(e) => {
            return ToolOutcome::error(format!(
                "invalid regex `{pattern}`: {e}; fix the pattern (Rust regex syntax: escape literal `(`, `[`, `{{`, `.` or `*` with a backslash)"
            ))
        }
    };
    let filter = match glob {
        Some(g) if !g.trim().is_empty() => match compile_glob(g) {
            Ok(m) => Some((m, g.contains('/'))),
            Err(e) => return ToolOutcome::error(e),
        },
        _ => None,
    };
    let root = match search_root(ws, path) {
        Ok(root) => root,
        Err(e) => return e.into(),
    };

    let totals = Mutex::new(GrepTotals::default());
    let search_one = |searcher: &mut Searcher, rel_to_root: &Path| {
        search_file(ws, &root, &matcher, searcher, rel_to_root, &totals);
    };
    if root.is_dir {
        walker(&root.absolute).build_parallel().run(|| {
            let mut searcher = new_searcher();
            let root = &root;
            let filter = &filter;
            let search_one = &search_one;
            let totals = &totals;
            Box::new(move |entry| {
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                let Ok(rel) = entry.path().strip_prefix(&root.absolute) else {
                    return WalkState::Continue;
                };
                if let Some((glob, by_path)) = filter {
                    let subject: &Path = if *by_path {
                        rel
                    } else {
                        Path::new(entry.file_name())
                    };
                    if !glob.is_match(subject) {
                        return WalkState::Continue;
                    }
                }
                let rel_to_root = root.relative.join(rel);
                // The walker reports real paths (it never follows links), so a name check is
                // enough here.
                if secret_reason(&rel_to_root).is_some() {
                    if let Ok(mut t) = totals.lock() {
                        t.secrets += 1;
                    }
                    return WalkState::Continue;
                }
                search_one(&mut searcher, &rel_to_root);
                WalkState::Continue
            })
        });
    } else {
        // A single file named explicitly is searched whatever the filter
        // and ignore rules say: the model asked for it. A file that may hold secrets is not:
        // its contents need an approval, which read_file asks for.
        let real = ws
            .root_dir(root.root_index)
            .canonicalize(&root.relative)
            .unwrap_or_else(|_| root.relative.clone());
        if let Some(why) = secret_reason(&real) {
            return ToolOutcome::error(format!(
                "`{}` is not searched: {why}; use read_file, which asks the user first",
                root.display
            ));
        }
        search_one(&mut new_searcher(), &root.relative);
    }

    let totals = match totals.into_inner() {
        Ok(t) => t,
        Err(poisoned) => poisoned.into_inner(),
    };
    let mut matches = totals.best.into_sorted_vec();
    if matches.is_empty() {
        let mut text = format!(
            "No matches for `{pattern}` in `{}` (hidden, gitignored and binary files are skipped).",
            root.display
        );
        if totals.secrets > 0 {
            text.push_str(&format!(
                " {} files that may hold secrets (.env, keys, credentials) were skipped; read one with read_file, which asks the user first.",
                totals.secrets
            ));
        }
        return ToolOutcome::ok(text);
    }
    let mut out: Vec<String> = matches
        .drain(..)
        .map(|m| format!("{}:{}:{}", m.path, m.line, m.text))
        .collect();
    let shown = out.len();
    let mut notes = Vec::new();
    if totals.total > shown {
        notes.push(format!(
            "… {} more matching lines not shown (showing the first {shown} of {}); narrow the pattern, path or glob",
            totals.total - shown,
            totals.total
        ));
    }
    if totals.cut_lines {
        notes.push(format!(
            "Lines longer than {GREP_MAX_LINE_CHARS} characters were cut (marked …); use read_file to see them whole."
        ));
    }
    if totals.unreadable > 0 {
        notes.push(format!(
            "{} files could not be read and were skipped.",
            totals.unreadable
        ));
    }
    if totals.secrets > 0 {
        notes.push(format!(
            "{} files that may hold secrets (.env, keys, credentials) were skipped; read one with read_file, which asks the user first.",
            totals.secrets
        ));
    }
    if !notes.is_empty() {
        out.push(String::new());
        out.extend(notes);
    }
    ToolOutcome::ok(out.join("\n"))
}

fn new_searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .build()
}

fn search_file(
    ws: &Workspace,
    root: &SearchRoot,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    rel_to_root: &Path,
    totals: &Mutex<GrepTotals>,
) {
    // The file is opened through the root's handle, not by the walker's
    // path, so a file swapped for an escaping symlink mid-walk is refused.
    let file = match ws.root_dir(root.root_index).open(rel_to_root) {
        Ok(file) => file.into_std(),
        Err(_) => {
            if let Ok(mut t) = totals.lock() {
                t.unreadable += 1;
            }
            return;
        }
    };
    let mut sink = FileSink {
        matches: Vec::new(),
        count: 0,
        binary: false,
        cut_lines: false,
    };
    let result = searcher.search_file(matcher, &file, &mut sink);
    let Ok(mut t) = totals.lock() else {
        return;
    };
    if result.is_err() {
        t.unreadable += 1;
        return;
    }
    if sink.binary || sink.count == 0 {
        return;
    }
    let shown_path = ws.display_path(root.root_index, rel_to_root);
    t.total += sink.count;
    t.cut_lines |= sink.cut_lines;
    for (line, text) in sink.matches {
        let m = GrepMatch {
            path: shown_path.clone(),
            line,
            text,
        };
        if t.best.len() < GREP_MAX_MATCHES {
            t.best.push(m);
        } else if t
            .best
            .peek()
            .is_some_and(|max| m.cmp(max) == CmpOrdering::Less)
        {
            t.best.pop();
            t.best.push(m);
        } else {
            // This file's lines come in order, so the rest sort later too.
            break;
        }
    }
}

// ---------------------------------------------------------------------------
// write_file / edit_file

/// A write or edit worked out and ready for approval. Nothing has been
/// written yet; `apply_edit` does that after the user approves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEdit {
    pub path: WorkspacePath,
    /// The file's content when the plan was made; `None` for a new file.
    pub old_content: Option<String>,
    pub new_content: String,
    pub diff: FileDiff,
    /// For edit_file, how many occurrences were replaced; `None` for
    /// write_file. The success message depends on it.
    pub replacements: Option<usize>,
}

/// Plans write_file: replace (or create) the whole file with `content`.
pub fn plan_write(ws: &Workspace, path: &str, content: &str) -> Result<PlannedEdit, String> {
    let p = ws.resolve(path).map_err(|e| e.to_string())?;
    // Protected paths are refused before anything is read.
    refuse_protected(ws, &p)?;
    let old = ws.read_text_if_exists(&p).map_err(|e| match e {
        WorkspaceError::NotUtf8 { path } => format!(
            "`{path}` exists and is not UTF-8 text; write_file will not replace it blindly, so use the shell tool if it must change"
        ),
        other => other.to_string(),
    })?;
    plan_write_from(ws, p, old, content)
}

/// Plans write_file against `old`, the file's current content as the caller read it (from
/// disk, or from the client's editor buffer).
pub fn plan_write_from(
    ws: &Workspace,
    p: WorkspacePath,
    old: Option<String>,
    content: &str,
) -> Result<PlannedEdit, String> {
    // Every plan checks protection here, whoever read `old` (the disk or the client's editor).
    refuse_protected(ws, &p)?;
    // Refusing now spares the user an approval for a write that would fail.
    ws.check_writable(&p).map_err(|e| e.to_string())?;
    if old.as_deref() == Some(content) {
        return Err(format!(
            "`{}` already contains exactly this content; nothing needs to be written",
            p.display
        ));
    }
    let diff = file_diff(&p.display, old.as_deref(), content);
    Ok(PlannedEdit {
        path: p,
        old_content: old,
        new_content: content.to_string(),
        diff,
        replacements: None,
    })
}

/// Refuse edits of protected paths (checked on the resolved path, also for new files).
pub fn refuse_protected(ws: &Workspace, p: &crate::workspace::WorkspacePath) -> Result<(), String> {
    let resolved = ws.resolved_relative(p).map_err(|e| e.to_string())?;
    let absolute = ws.roots()[p.root_index].join(&resolved);
    match protected_reason(&resolved, &absolute) {
        Some(why) => Err(format!(
            "`{}` is protected: {why}; tandem does not let the agent change it. Ask the user to make this change themselves",
            p.display
        )),
        None => Ok(()),
    }
}

/// Why a change to `path` asks the user every time, in every mode: a project file the user
/// edits on purpose that also runs code (`.vscode/tasks.json`; see
/// `workspace::protected::ASK_FILES`), on the resolved path.
pub fn ask_change_reason(ws: &Workspace, path: &str) -> Option<String> {
    let p = ws.resolve(path).ok()?;
    let resolved = ws.resolved_relative(&p).ok()?;
    crate::workspace::protected::ask_reason(&resolved).map(|why| {
        format!(
            "changing `{}` needs your approval every time: {why}",
            p.display
        )
    })
}

/// How a tool touches a file that may hold secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretAccess {
    Read,
    Edit,
    Write,
}

impl SecretAccess {
    fn verb(self) -> &'static str {
        match self {
            SecretAccess::Read => "reading",
            SecretAccess::Edit => "editing",
            SecretAccess::Write => "writing",
        }
    }
}

/// Why this `access` to `path` needs the user's approval because the file may hold secrets, on
/// the resolved path (a link cannot hide one). An edit or a write reveals content too (whether
/// `old_string` is there, whether anything changed), so each of them asks like a read.
pub fn secret_access_reason(ws: &Workspace, path: &str, access: SecretAccess) -> Option<String> {
    let p = ws.resolve(path).ok()?;
    let resolved = ws.resolved_relative(&p).ok()?;
    if access != SecretAccess::Read {
        // A protected file (`.git/config`) is refused outright when the change is planned;
        // asking first would only offer an approval that cannot be granted.
        let absolute = ws.roots()[p.root_index].join(&resolved);
        if protected_reason(&resolved, &absolute).is_some() {
            return None;
        }
    }
    secret_reason(&resolved).map(|why| {
        format!(
            "{} `{}` needs your approval: {why}",
            access.verb(),
            p.display
        )
    })
}

/// Plans edit_file: replace `old_string` with `new_string`, which must be
/// unique in the file unless `replace_all` is set.
pub fn plan_edit(
    ws: &Workspace,
    path: &str,
    old_string: &str,
    new_string: &str,
    replace_all: bool,
) -> Result<PlannedEdit, String> {
    if old_string.is_empty() {
        return Err("old_string is empty; give the exact text to replace (copy it from read_file), or use write_file to create a file".to_string());
    }
    if old_string == new_string {
        return Err(
            "old_string and new_string are identical, so the edit would change nothing; give the new text in new_string"
                .to_string(),
        );
    }
    let p = ws.resolve(path).map_err(|e| e.to_string())?;
    refuse_protected(ws, &p)?;
    let old = ws.read_text_if_exists(&p).map_err(|e| e.to_string())?;
    plan_edit_from(ws, p, old, old_string, new_string, replace_all)
}

/// Plans edit_file against `old`, the file's current content as the caller read it (from
/// disk, or from the client's editor buffer); `None` means the file does not exist.
pub fn plan_edit_from(
    ws: &Workspace,
    p: WorkspacePath,
    old: Option<String>,
    old_string: &str,
    new_string: &str,
    replace_all: bool,
) -> Result<PlannedEdit, String> {
    // Every plan checks protection here, whoever read `old` (the disk or the client's editor).
    refuse_protected(ws, &p)?;
    let Some(old) = old else {
        return Err(format!(
            "`{}` does not exist; edit_file only changes existing files, so use write_file to create it (or check the path with glob)",
            p.display
        ));
    };

    let mut needle = std::borrow::Cow::Borrowed(old_string);
    let mut replacement = std::borrow::Cow::Borrowed(new_string);
    let mut count = old.matches(needle.as_ref()).count();
    // Models usually send '\n' line endings; a CRLF file would then never
    // match, so retry with the file's own line endings.
    if count == 0
        && old.contains("\r\n")
        && old_string.contains('\n')
        && !old_string.contains("\r\n")
    {
        let crlf = old_string.replace('\n', "\r\n");
        let crlf_count = old.matches(crlf.as_str()).count();
        if crlf_count > 0 {
            count = crlf_count;
            needle = std::borrow::Cow::Owned(crlf);
            replacement = std::borrow::Cow::Owned(new_string.replace('\n', "\r\n"));
        }
    }
    if count == 0 {
        return Err(format!(
            "old_string was not found in `{}`; call read_file on it and copy the exact text, including whitespace and indentation",
            p.display
        ));
    }
    if count > 1 && !replace_all {
        return Err(format!(
            "old_string occurs {count} times in `{}`; include more surrounding lines to make it unique, or set replace_all to true to change every occurrence",
            p.display
        ));
    }
    ws.check_writable(&p).map_err(|e| e.to_string())?;
    let new = if replace_all {
        old.replace(needle.as_ref(), replacement.as_ref())
    } else {
        old.replacen(needle.as_ref(), replacement.as_ref(), 1)
    };
    let diff = file_diff(&p.display, Some(&old), &new);
    Ok(PlannedEdit {
        path: p,
        old_content: Some(old),
        new_content: new,
        diff,
        replacements: Some(count),
    })
}

/// Carries out an approved plan. The file is re-read first: if it changed
/// since planning, the write is refused so nobody's work is overwritten.
/// `content_override` is the user's edited version of the proposal.
pub fn apply_edit(
    ws: &Workspace,
    plan: &PlannedEdit,
    content_override: Option<&str>,
) -> ToolOutcome {
    let shown = &plan.path.display;
    let current = match ws.read_text_if_exists(&plan.path) {
        Ok(current) => current,
        Err(e) => {
            return ToolOutcome::error(format!("could not re-read `{shown}` before writing: {e}"))
        }
    };
    let content = match content_to_write(plan, current.as_deref(), content_override) {
        Ok(content) => content,
        Err(refused) => return refused,
    };
    // Checked again where the write really lands: the plan's check saw names, and a command
    // may have swapped a folder for a link to `.git` since.
    let root = ws.roots()[plan.path.root_index].clone();
    let landing_check = |landing: &Path| match protected_reason(landing, &root.join(landing)) {
        Some(why) => Err(why),
        None => Ok(()),
    };
    if let Err(e) = ws.write_atomic(&plan.path, content.as_bytes(), &landing_check) {
        return e.into();
    }
    edit_written(plan, content_override)
}

/// The first half of applying a plan: refuse if the file changed since planning (`current`
/// is its content now), else the content to write (the user's edited version, if any).
pub fn content_to_write<'a>(
    plan: &'a PlannedEdit,
    current: Option<&str>,
    content_override: Option<&'a str>,
) -> Result<&'a str, ToolOutcome> {
    let shown = &plan.path.display;
    if current != plan.old_content.as_deref() {
        let what = match (&plan.old_content, &current) {
            (Some(_), None) => "was deleted",
            (None, Some(_)) => "was created by someone else",
            _ => "was changed by someone else",
        };
        return Err(ToolOutcome::error(format!(
            "`{shown}` {what} after this change was proposed, so nothing was written; call read_file on it again and redo the change against its current content"
        )));
    }
    let overridden = content_override.filter(|c| *c != plan.new_content);
    Ok(overridden.unwrap_or(&plan.new_content))
}

/// The second half: the result the model sees once the content was written.
pub fn edit_written(plan: &PlannedEdit, content_override: Option<&str>) -> ToolOutcome {
    let shown = &plan.path.display;
    let overridden = content_override.filter(|c| *c != plan.new_content);
    let content = overridden.unwrap_or(&plan.new_content);
    let new_file = if plan.old_content.is_none() {
        " (new file)"
    } else {
        ""
    };
    match (overridden, plan.replacements) {
        (None, Some(k)) => ToolOutcome::ok(format!("Edited {shown}: replaced {k} occurrence(s)")),
        (None, None) => ToolOutcome::ok(format!(
            "Wrote {} bytes to {shown}{new_file}",
            content.len()
        )),
        (Some(user), _) => {
            let mut out = format!(
                "Wrote {} bytes to {shown}{new_file}. The user edited your proposed content before approving; the file now holds the user's version.",
                user.len()
            );
            let diff = unified_diff(&plan.new_content, user, "proposed", "approved");
            let lines: Vec<&str> = diff.lines().collect();
            out.push_str("\nHow the user's version differs from your proposal:\n");
            out.push_str(&lines[..lines.len().min(OVERRIDE_DIFF_MAX_LINES)].join("\n"));
            if lines.len() > OVERRIDE_DIFF_MAX_LINES {
                out.push_str(&format!(
                    "\n… {} more diff lines; call read_file to see the file as it is now",
                    lines.len() - OVERRIDE_DIFF_MAX_LINES
                ));
            }
            ToolOutcome::ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
        ws: Workspace,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "needle secret\n").unwrap();
        let ws = Workspace::open(vec![root]).unwrap();
        let root = ws.roots()[0].clone();
        Fixture {
            _tmp: tmp,
            root,
            outside,
            ws,
        }
    }

    fn write(f: &Fixture, rel: &str, content: &str) {
        let path = f.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    // -- read_file ----------------------------------------------------------

    #[test]
    fn read_file_numbers_lines_like_cat_n() {
        let f = fixture();
        write(&f, "a.txt", "alpha\nbeta\r\ngamma");
        let out = read_file(&f.ws, "a.txt", None, None);
        assert!(!out.is_error, "{}", out.output);
        assert_eq!(out.output, "     1\talpha\n     2\tbeta\n     3\tgamma");
    }

    #[test]
    fn read_file_offset_limit_and_more_lines_note() {
        let f = fixture();
        write(&f, "n.txt", &numbered(10));
        let out = read_file(&f.ws, "n.txt", Some(3), Some(4));
        assert!(!out.is_error);
        let lines: Vec<&str> = out.output.lines().collect();
        assert_eq!(lines[0], "     3\tline 3");
        assert_eq!(lines[3], "     6\tline 6");
        assert!(!out.output.contains("line 7\n"));
        assert!(
            out.output
                .ends_with("… 4 more lines; call read_file with offset=7"),
            "{}",
            out.output
        );
        // Reading to the end gives no note.
        let tail = read_file(&f.ws, "n.txt", Some(7), None);
        assert!(tail.output.starts_with("     7\tline 7"));
        assert!(!tail.output.contains("more lines"), "{}", tail.output);
    }

    #[test]
    fn read_file_default_limit_is_2000_lines() {
        let f = fixture();
        write(&f, "big.txt", &numbered(2500));
        let out = read_file(&f.ws, "big.txt", None, None);
        assert!(out.output.contains("  2000\tline 2000"));
        assert!(!out.output.contains("line 2001"));
        assert!(out
            .output
            .contains("… 500 more lines; call read_file with offset=2001"));
    }

    #[test]
    fn read_file_truncates_long_lines() {
        let f = fixture();
        let long = "x".repeat(5000);
        write(&f, "long.txt", &format!("{long}\nshort\n"));
        let out = read_file(&f.ws, "long.txt", None, None);
        let first = out.output.lines().next().unwrap();
        assert_eq!(first.matches('x').count(), 2000);
        assert!(first.ends_with("[line truncated]"));
        assert!(out.output.contains("     2\tshort"));
        assert!(out.output.contains("longer than 2000 characters"));
    }

    #[test]
    fn a_line_longer_than_the_cap_is_kept_up_to_it_and_skipped_to_its_newline() {
        let mut text = "é".repeat(5_000);
        text.push_str("\nnext\n");
        let mut reader = std::io::BufReader::with_capacity(64, Cursor::new(text.as_bytes()));
        let mut line = Vec::new();
        let first = read_line_capped(&mut reader, &mut line, 101).unwrap();
        assert!(first.cut);
        assert_eq!(first.consumed, 10_001);
        assert_eq!(line.len(), 101, "kept only the cap");
        let second = read_line_capped(&mut reader, &mut line, 101).unwrap();
        assert!(!second.cut);
        assert_eq!(line, b"next\n");
        assert_eq!(
            read_line_capped(&mut reader, &mut line, 101)
                .unwrap()
                .consumed,
            0
        );
        // The window shows a character-cut line without calling the file non-UTF-8.
        let f = fixture();
        write(&f, "long.txt", &format!("{}\nb\n", "é".repeat(3_000)));
        let out = read_file(&f.ws, "long.txt", None, Some(1));
        assert!(out.output.contains("[line truncated]"), "{}", out.output);
        assert!(!out.output.contains("not valid UTF-8"), "{}", out.output);
        assert!(out.output.contains("1 more lines"), "{}", out.output);
    }

    #[test]
    fn read_file_refuses_binary_files() {
        let f = fixture();
        std::fs::write(f.root.join("blob.bin"), b"ELF\x00\x01\x02text").unwrap();
        let out = read_file(&f.ws, "blob.bin", None, None);
        assert!(out.is_error);
        assert!(out.output.contains("`blob.bin`"), "{}", out.output);
        assert!(out.output.contains("binary"), "{}", out.output);
    }

    #[test]
    fn read_file_offset_past_end_and_empty_file() {
        let f = fixture();
        write(&f, "three.txt", &numbered(3));
        let out = read_file(&f.ws, "three.txt", Some(10), None);
        assert!(out.is_error);
        assert!(out.output.contains("has 3 lines"), "{}", out.output);
        write(&f, "empty.txt", "");
        let out = read_file(&f.ws, "empty.txt", None, None);
        assert!(!out.is_error);
        assert!(out.output.contains("is empty"));
    }

    #[test]
    fn read_file_errors_name_the_path() {
        let f = fixture();
        let out = read_file(&f.ws, "nope.txt", None, None);
        assert!(out.is_error);
        assert!(out.output.contains("`nope.txt` does not exist"));
        std::fs::create_dir(f.root.join("dir")).unwrap();
        let out = read_file(&f.ws, "dir", None, None);
        assert!(out.is_error);
        assert!(out.output.contains("not a regular file"), "{}", out.output);
    }

    #[test]
    fn read_file_refuses_escapes() {
        let f = fixture();
        symlink(f.outside.join("secret.txt"), f.root.join("link")).unwrap();
        for path in ["../outside/secret.txt", "link"] {
            let out = read_file(&f.ws, path, None, None);
            assert!(out.is_error, "{path}");
            assert!(
                out.output.contains("outside the workspace"),
                "{}",
                out.output
            );
            assert!(!out.output.contains("needle secret"));
        }
        let abs = f.outside.join("secret.txt");
        let out = read_file(&f.ws, abs.to_str().unwrap(), None, None);
        assert!(out.is_error);
        assert!(out.output.contains("outside the workspace"));
    }

    // -- list_dir -----------------------------------------------------------

    #[test]
    fn list_dir_marks_dirs_and_sorts() {
        let f = fixture();
        write(&f, "b.txt", "");
        write(&f, "a/inner.txt", "");
        write(&f, ".hidden", "");
        let out = list_dir(&f.ws, ".");
        assert!(!out.is_error);
        assert_eq!(out.output, ".hidden\na/\nb.txt");
    }

    #[test]
    fn list_dir_caps_entries() {
        let f = fixture();
        for i in 0..1005 {
            write(&f, &format!("many/f{i:04}"), "");
        }
        let out = list_dir(&f.ws, "many");
        assert!(out.output.starts_with("f0000\nf0001\n"));
        assert!(out.output.contains("f0999"));
        assert!(!out.output.contains("f1000"));
        assert!(out
            .output
            .contains("5 more entries not shown (1005 in total)"));
    }

    #[test]
    fn list_dir_refuses_symlinked_dir_outside() {
        let f = fixture();
        symlink(&f.outside, f.root.join("out")).unwrap();
        let out = list_dir(&f.ws, "out");
        assert!(out.is_error);
        assert!(
            out.output.contains("outside the workspace"),
            "{}",
            out.output
        );
        assert!(!out.output.contains("secret.txt"));
        let out = list_dir(&f.ws, "..");
        assert!(out.is_error);
        assert!(out.output.contains("outside the workspace"));
    }

    // -- glob -----------------------------------------------------------------

    #[test]
    fn glob_is_sorted_and_gitignore_aware() {
        let f = fixture();
        write(&f, ".gitignore", "target/\n*.log\n");
        write(&f, "src/b.rs", "");
        write(&f, "src/a.rs", "");
        write(&f, "src/nested/c.rs", "");
        write(&f, "top.rs", "");
        write(&f, "target/debug/gen.rs", "");
        write(&f, "debug.log", "");
        write(&f, ".hidden/h.rs", "");
        write(&f, ".git/x.rs", "");
        let out = glob(&f.ws, "**/*.rs", None);
        assert!(!out.is_error, "{}", out.output);
        assert_eq!(out.output, "src/a.rs\nsrc/b.rs\nsrc/nested/c.rs\ntop.rs");
        // `*` stays within one directory.
        assert_eq!(glob(&f.ws, "*.rs", None).output, "top.rs");
        assert!(glob(&f.ws, "*.log", None)
            .output
            .starts_with("No files match"));
    }

    #[test]
    fn glob_in_subdirectory_matches_relative_to_it() {
        let f = fixture();
        write(&f, "src/a.rs", "");
        write(&f, "src/deep/b.rs", "");
        write(&f, "other/c.rs", "");
        let out = glob(&f.ws, "*.rs", Some("src"));
        assert_eq!(out.output, "src/a.rs");
        let out = glob(&f.ws, "**/*.rs", Some("src"));
        assert_eq!(out.output, "src/a.rs\nsrc/deep/b.rs");
    }

    #[test]
    fn glob_caps_results_with_a_note() {
        let f = fixture();
        for i in 0..1003 {
            write(&f, &format!("d/f{i:04}.txt"), "");
        }
        let out = glob(&f.ws, "**/*.txt", None);
        let lines: Vec<&str> = out.output.lines().collect();
        assert_eq!(lines[0], "d/f0000.txt");
        assert_eq!(lines[999], "d/f0999.txt");
        assert!(out
            .output
            .contains("3 more results not shown (1003 in total)"));
    }

    #[test]
    fn glob_does_not_follow_or_escape_symlinks() {
        let f = fixture();
        write(&f, "real.txt", "");
        symlink(&f.outside, f.root.join("out")).unwrap();
        let out = glob(&f.ws, "**/*.txt", None);
        assert_eq!(out.output, "real.txt");
        let out = glob(&f.ws, "*", Some("out"));
        assert!(out.is_error);
        assert!(
            out.output.contains("outside the workspace"),
            "{}",
            out.output
        );
        let out = glob(&f.ws, "*", Some("../outside"));
        assert!(out.is_error);
        assert!(out.output.contains("outside the workspace"));
    }

    #[test]
    fn glob_invalid_pattern_is_an_error() {
        let f = fixture();
        let out = glob(&f.ws, "src/[", None);
        assert!(out.is_error);
        assert!(out.output.contains("invalid glob pattern `src/[`"));
    }

    // -- grep -----------------------------------------------------------------

    #[test]
    fn grep_finds_sorted_matches_and_respects_gitignore() {
        let f = fixture();
        write(&f, ".gitignore", "ignored/\n");
        write(&f, "b.txt", "one needle\nnothing\nneedle two\n");
        write(&f, "a/x.rs", "fn needle() {}\n");
        write(&f, "ignored/c.txt", "needle in ignored\n");
        write(&f, ".hidden.txt", "needle hidden\n");
        std::fs::write(f.root.join("bin.dat"), b"needle\x00binary").unwrap();
        let out = grep(&f.ws, "needle", None, None);
        assert!(!out.is_error, "{}", out.output);
        assert_eq!(
            out.output,
            "a/x.rs:1:fn needle() {}\nb.txt:1:one needle\nb.txt:3:needle two"
        );
    }

    #[test]
    fn grep_caps_matches_and_long_lines_with_notes() {
        let f = fixture();
        let many: String = (1..=300).map(|i| format!("hit {i}\n")).collect();
        write(&f, "a.txt", &many);
        write(&f, "b.txt", &many);
        write(&f, "c.txt", &format!("hit {}\n", "y".repeat(500)));
        let out = grep(&f.ws, "hit", None, None);
        let lines: Vec<&str> = out.output.lines().collect();
        assert_eq!(lines[0], "a.txt:1:hit 1");
        assert_eq!(lines[299], "a.txt:300:hit 300");
        assert_eq!(lines[300], "b.txt:1:hit 1");
        assert_eq!(lines[499], "b.txt:200:hit 200");
        assert!(!out.output.contains("c.txt:1"));
        assert!(
            out.output
                .contains("101 more matching lines not shown (showing the first 500 of 601)"),
            "{}",
            out.output
        );

        let out = grep(&f.ws, "hit y", None, None);
        let first = out.output.lines().next().unwrap();
        assert!(first.starts_with("c.txt:1:hit yyy"));
        assert_eq!(first.chars().count(), "c.txt:1:".len() + 200 + 1);
        assert!(out.output.contains("longer than 200 characters were cut"));
    }

    #[test]
    fn grep_glob_filter_and_path() {
        let f = fixture();
        write(&f, "src/a.rs", "needle\n");
        write(&f, "src/deep/b.rs", "needle\n");
        write(&f, "src/c.txt", "needle\n");
        write(&f, "docs/d.rs", "needle\n");
        let out = grep(&f.ws, "needle", None, Some("*.rs"));
        assert_eq!(
            out.output,
            "docs/d.rs:1:needle\nsrc/a.rs:1:needle\nsrc/deep/b.rs:1:needle"
        );
        let out = grep(&f.ws, "needle", Some("src"), Some("deep/*.rs"));
        assert_eq!(out.output, "src/deep/b.rs:1:needle");
        let out = grep(&f.ws, "needle", Some("src/c.txt"), None);
        assert_eq!(out.output, "src/c.txt:1:needle");
    }

    #[test]
    fn grep_invalid_regex_is_an_error() {
        let f = fixture();
        let out = grep(&f.ws, "fn (", None, None);
        assert!(out.is_error);
        assert!(
            out.output.contains("invalid regex `fn (`"),
            "{}",
            out.output
        );
    }

    #[test]
    fn grep_no_match_is_not_an_error() {
        let f = fixture();
        write(&f, "a.txt", "hello\n");
        let out = grep(&f.ws, "absent", None, None);
        assert!(!out.is_error);
        assert!(out.output.starts_with("No matches for `absent`"));
    }

    #[test]
    fn grep_refuses_symlinked_dir_outside_and_skips_links() {
        let f = fixture();
        symlink(&f.outside, f.root.join("out")).unwrap();
        symlink(f.outside.join("secret.txt"), f.root.join("file_link")).unwrap();
        write(&f, "mine.txt", "needle here\n");
        let out = grep(&f.ws, "needle", None, None);
        assert_eq!(out.output, "mine.txt:1:needle here");
        let out = grep(&f.ws, "needle", Some("out"), None);
        assert!(out.is_error);
        assert!(
            out.output.contains("outside the workspace"),
            "{}",
            out.output
        );
        let out = grep(&f.ws, "needle", Some("file_link"), None);
        assert!(out.is_error);
        assert!(!out.output.contains("needle secret"));
    }

    // -- write_file / edit_file -----------------------------------------------

    #[test]
    fn plan_write_new_file_and_apply() {
        let f = fixture();
        let plan = plan_write(&f.ws, "new/dir/file.txt", "hello\n").unwrap();
        assert_eq!(plan.old_content, None);
        assert_eq!(plan.diff.old_text, None);
        assert!(plan
            .diff
            .unified
            .starts_with("--- /dev/null\n+++ b/new/dir/file.txt\n"));
        // Planning writes nothing.
        assert!(!f.root.join("new").exists());
        let out = apply_edit(&f.ws, &plan, None);
        assert!(!out.is_error, "{}", out.output);
        assert_eq!(out.output, "Wrote 6 bytes to new/dir/file.txt (new file)");
        assert_eq!(
            std::fs::read_to_string(f.root.join("new/dir/file.txt")).unwrap(),
            "hello\n"
        );
    }

    #[test]
    fn plan_write_overwrite_and_same_content() {
        let f = fixture();
        write(&f, "a.txt", "old\n");
        let plan = plan_write(&f.ws, "a.txt", "new\n").unwrap();
        assert_eq!(plan.old_content.as_deref(), Some("old\n"));
        assert!(plan.diff.unified.contains("-old\n+new\n"));
        let out = apply_edit(&f.ws, &plan, None);
        assert_eq!(out.output, "Wrote 4 bytes to a.txt");
        let err = plan_write(&f.ws, "a.txt", "new\n").unwrap_err();
        assert!(err.contains("already contains exactly this content"));
    }

    #[test]
    fn plan_write_refuses_escapes_before_approval() {
        let f = fixture();
        symlink(f.outside.join("secret.txt"), f.root.join("link")).unwrap();
        symlink(&f.outside, f.root.join("out")).unwrap();
        std::fs::create_dir(f.root.join("a")).unwrap();
        for path in ["../x.txt", "link", "out/new.txt", "a/../../x.txt"] {
            let err = plan_write(&f.ws, path, "x").unwrap_err();
            assert!(err.contains("outside the workspace"), "{path}: {err}");
        }
        let err = plan_write(&f.ws, "missing/../../x.txt", "x").unwrap_err();
        assert!(err.contains("`..`"), "{err}");
        assert_eq!(
            std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
            "needle secret\n"
        );
    }

    #[test]
    fn plan_edit_missing_file() {
        let f = fixture();
        let err = plan_edit(&f.ws, "nope.rs", "a", "b", false).unwrap_err();
        assert!(err.contains("`nope.rs` does not exist"), "{err}");
        assert!(err.contains("write_file"), "{err}");
    }

    #[test]
    fn plan_edit_rejects_empty_and_identical_strings() {
        let f = fixture();
        write(&f, "a.txt", "abc\n");
        let err = plan_edit(&f.ws, "a.txt", "", "x", false).unwrap_err();
        assert!(err.contains("old_string is empty"), "{err}");
        let err = plan_edit(&f.ws, "a.txt", "abc", "abc", false).unwrap_err();
        assert!(err.contains("identical"), "{err}");
    }

    #[test]
    fn plan_edit_not_found_suggests_read_file() {
        let f = fixture();
        write(&f, "a.txt", "abc\n");
        let err = plan_edit(&f.ws, "a.txt", "xyz", "q", false).unwrap_err();
        assert!(err.contains("not found in `a.txt`"), "{err}");
        assert!(err.contains("read_file"), "{err}");
    }

    #[test]
    fn plan_edit_ambiguous_without_replace_all() {
        let f = fixture();
        write(&f, "a.txt", "foo\nbar\nfoo\nfoo\n");
        let err = plan_edit(&f.ws, "a.txt", "foo", "baz", false).unwrap_err();
        assert!(err.contains("occurs 3 times"), "{err}");
        assert!(err.contains("replace_all"), "{err}");
        assert!(err.contains("more surrounding lines"), "{err}");
    }

    #[test]
    fn plan_edit_replace_all_and_apply() {
        let f = fixture();
        write(&f, "a.txt", "foo\nbar\nfoo\nfoo\n");
        let plan = plan_edit(&f.ws, "a.txt", "foo", "baz", true).unwrap();
        assert_eq!(plan.new_content, "baz\nbar\nbaz\nbaz\n");
        assert_eq!(plan.replacements, Some(3));
        assert_eq!(
            std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
            "foo\nbar\nfoo\nfoo\n"
        );
        let out = apply_edit(&f.ws, &plan, None);
        assert_eq!(out.output, "Edited a.txt: replaced 3 occurrence(s)");
        assert_eq!(
            std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
            "baz\nbar\nbaz\nbaz\n"
        );
    }

    #[test]
    fn plan_edit_unique_match() {
        let f = fixture();
        write(&f, "a.rs", "fn a() {}\nfn b() {}\n");
        let plan = plan_edit(&f.ws, "a.rs", "fn b() {}", "fn c() {}", false).unwrap();
        assert_eq!(plan.new_content, "fn a() {}\nfn c() {}\n");
        assert!(plan.diff.unified.contains("-fn b() {}\n+fn c() {}\n"));
        assert_eq!(plan.diff.path, "a.rs");
        assert_eq!(
            apply_edit(&f.ws, &plan, None).output,
            "Edited a.rs: replaced 1 occurrence(s)"
        );
    }

    #[test]
    fn plan_edit_matches_crlf_files() {
        let f = fixture();
        write(&f, "w.txt", "one\r\ntwo\r\nthree\r\n");
        let plan = plan_edit(&f.ws, "w.txt", "one\ntwo", "uno\ndos", false).unwrap();
        assert_eq!(plan.new_content, "uno\r\ndos\r\nthree\r\n");
    }

    #[test]
    fn apply_edit_refuses_when_file_changed_since_planning() {
        let f = fixture();
        write(&f, "a.txt", "v1\n");
        let plan = plan_edit(&f.ws, "a.txt", "v1", "v2", false).unwrap();
        write(&f, "a.txt", "someone else\n");
        let out = apply_edit(&f.ws, &plan, None);
        assert!(out.is_error);
        assert!(
            out.output.contains("changed by someone else"),
            "{}",
            out.output
        );
        assert!(out.output.contains("read_file"));
        assert_eq!(
            std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
            "someone else\n"
        );

        // A new-file plan is refused if the file appeared meanwhile...
        let plan = plan_write(&f.ws, "b.txt", "mine\n").unwrap();
        write(&f, "b.txt", "theirs\n");
        let out = apply_edit(&f.ws, &plan, None);
        assert!(out.is_error);
        assert!(out.output.contains("created by someone else"));
        assert_eq!(
            std::fs::read_to_string(f.root.join("b.txt")).unwrap(),
            "theirs\n"
        );

        // ...and an overwrite plan if the file disappeared.
        let plan = plan_write(&f.ws, "b.txt", "mine\n").unwrap();
        std::fs::remove_file(f.root.join("b.txt")).unwrap();
        let out = apply_edit(&f.ws, &plan, None);
        assert!(out.is_error);
        assert!(out.output.contains("was deleted"));
        assert!(!f.root.join("b.txt").exists());
    }

    #[test]
    fn apply_edit_honours_content_override() {
        let f = fixture();
        write(&f, "a.txt", "hello\nworld\n");
        let plan = plan_edit(&f.ws, "a.txt", "world", "there", false).unwrap();
        let user = "hello\nuser version\n";
        let out = apply_edit(&f.ws, &plan, Some(user));
        assert!(!out.is_error, "{}", out.output);
        assert_eq!(std::fs::read_to_string(f.root.join("a.txt")).unwrap(), user);
        assert!(out
            .output
            .starts_with(&format!("Wrote {} bytes to a.txt.", user.len())));
        assert!(out.output.contains(
            "The user edited your proposed content before approving; the file now holds the user's version."
        ));
        assert!(
            out.output.contains("-there\n+user version"),
            "{}",
            out.output
        );

        // An override identical to the proposal is a plain approval.
        write(&f, "b.txt", "x\n");
        let plan = plan_edit(&f.ws, "b.txt", "x", "y", false).unwrap();
        let out = apply_edit(&f.ws, &plan, Some("y\n"));
        assert_eq!(out.output, "Edited b.txt: replaced 1 occurrence(s)");
    }

    #[test]
    fn write_tools_keep_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let f = fixture();
        write(&f, "run.sh", "#!/bin/sh\necho hi\n");
        std::fs::set_permissions(
            f.root.join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let plan = plan_edit(&f.ws, "run.sh", "hi", "bye", false).unwrap();
        assert!(!apply_edit(&f.ws, &plan, None).is_error);
        let mode = std::fs::metadata(f.root.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }
}
