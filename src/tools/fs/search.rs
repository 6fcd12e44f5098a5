//! `list_dir`, `glob` and `grep`: gitignore-aware walks (the `ignore` crate) and ripgrep's own
//! searcher, each with a cap on what it returns and a note when it cut.

use super::*;

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
pub(super) struct SearchRoot {
    root_index: usize,
    /// Canonical path of the search start, relative to the root.
    relative: PathBuf,
    /// The same place as an absolute path, for the path-based walker.
    absolute: PathBuf,
    is_dir: bool,
    display: String,
}

pub(super) fn search_root(
    ws: &Workspace,
    path: Option<&str>,
) -> Result<SearchRoot, WorkspaceError> {
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
pub(super) fn walker(start: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(start);
    builder
        .hidden(true)
        .follow_links(false)
        .require_git(false)
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

pub(super) fn compile_glob(pattern: &str) -> Result<GlobMatcher, String> {
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
pub(super) struct GrepMatch {
    path: String,
    line: u64,
    text: String,
}

/// Collects one file's matches; drops them all if the file turns out to be
/// binary partway through.
pub(super) struct FileSink {
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
pub(super) struct GrepTotals {
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

pub(super) fn new_searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .build()
}

pub(super) fn search_file(
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
