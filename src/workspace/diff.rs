//! Unified diffs of proposed file changes, built with the `similar` crate.

use std::time::{Duration, Instant};

use similar::TextDiff;

/// A proposed change to one file: both texts plus the unified diff shown to
/// the user for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    pub path: String,
    /// `None` when the file does not exist yet.
    pub old_text: Option<String>,
    pub new_text: String,
    pub unified: String,
    /// How `unified` was made: line by line, or (past [`DIFF_DEADLINE`]) as a whole-file
    /// replacement, which the approval says.
    pub shape: DiffShape,
}

/// How a unified diff compares its two texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffShape {
    /// Hunks of the lines that changed, with context.
    Lines,
    /// Every old line removed and every new line added, in one hunk: the line-by-line
    /// comparison did not finish within [`DIFF_DEADLINE`].
    WholeFile,
}

/// Lines of unchanged context around each hunk, as in `diff -u`.
const CONTEXT_LINES: usize = 3;

/// How long the line-by-line comparison may search. Myers' algorithm is quadratic in the
/// number of changed lines: a rewrite of every line of an 80,000-line file took 33 s, and
/// 400,000 lines far longer. Past the deadline the change is shown as a whole-file
/// replacement, which is exact, only not minimal.
pub const DIFF_DEADLINE: Duration = Duration::from_millis(1000);

/// Builds the diff between `old_text` (`None` for a new file) and `new_text`.
/// Headers are `--- a/PATH` and `+++ b/PATH`, with `--- /dev/null` for a new
/// file, as git prints them.
pub fn file_diff(path: &str, old_text: Option<&str>, new_text: &str) -> FileDiff {
    let old_header = match old_text {
        Some(_) => prefixed("a", path),
        None => "/dev/null".to_string(),
    };
    let new_header = prefixed("b", path);
    let (unified, shape) =
        unified_diff_shaped(old_text.unwrap_or(""), new_text, &old_header, &new_header);
    FileDiff {
        path: path.to_string(),
        old_text: old_text.map(str::to_string),
        new_text: new_text.to_string(),
        unified,
        shape,
    }
}

/// A unified diff between two texts with the given header names. Identical
/// texts give an empty string.
pub fn unified_diff(old: &str, new: &str, old_header: &str, new_header: &str) -> String {
    unified_diff_shaped(old, new, old_header, new_header).0
}

fn unified_diff_shaped(
    old: &str,
    new: &str,
    old_header: &str,
    new_header: &str,
) -> (String, DiffShape) {
    let deadline = Instant::now() + DIFF_DEADLINE;
    let diff = TextDiff::configure()
        .deadline(deadline)
        .diff_lines(old, new);
    if Instant::now() >= deadline && old != new {
        // Past the deadline similar approximates, and its hunks can be long and hard to read;
        // one honest replacement is clearer, and the approval says which it is.
        return (
            whole_file_replacement(old, new, old_header, new_header),
            DiffShape::WholeFile,
        );
    }
    let unified = diff
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .header(old_header, new_header)
        .to_string();
    (unified, DiffShape::Lines)
}

/// One hunk that removes every line of `old` and adds every line of `new`.
fn whole_file_replacement(old: &str, new: &str, old_header: &str, new_header: &str) -> String {
    let old_lines = old.split_inclusive('\n').count();
    let new_lines = new.split_inclusive('\n').count();
    let range = |n: usize| {
        if n == 0 {
            "0,0".to_owned()
        } else {
            format!("1,{n}")
        }
    };
    let mut out = String::with_capacity(old.len() + new.len() + (old_lines + new_lines) * 2 + 128);
    out.push_str(&format!(
        "--- {old_header}\n+++ {new_header}\n@@ -{} +{} @@\n",
        range(old_lines),
        range(new_lines)
    ));
    for (sign, text) in [('-', old), ('+', new)] {
        for line in text.split_inclusive('\n') {
            out.push(sign);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    out
}

/// `a/src/x.rs` for relative paths; absolute paths (files in a second root)
/// already start with '/', so they become `a/abs/path` without doubling it.
fn prefixed(side: &str, path: &str) -> String {
    if path.starts_with('/') {
        format!("{side}{path}")
    } else {
        format!("{side}/{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_file_diff_has_no_old_text_and_dev_null_header() {
        let d = file_diff("src/new.rs", None, "fn main() {}\n");
        assert_eq!(d.old_text, None);
        assert_eq!(d.new_text, "fn main() {}\n");
        assert_eq!(d.path, "src/new.rs");
        let mut lines = d.unified.lines();
        assert_eq!(lines.next(), Some("--- /dev/null"));
        assert_eq!(lines.next(), Some("+++ b/src/new.rs"));
        assert!(d.unified.contains("+fn main() {}"), "{}", d.unified);
        assert!(!d.unified.contains("\n-"), "{}", d.unified);
    }

    #[test]
    fn modified_file_diff_has_headers_and_three_lines_of_context() {
        let old: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let d = file_diff("notes.txt", Some(&old), &new);
        assert_eq!(d.old_text.as_deref(), Some(old.as_str()));
        assert!(d.unified.starts_with("--- a/notes.txt\n+++ b/notes.txt\n"));
        assert!(d.unified.contains("@@ -7,7 +7,7 @@"), "{}", d.unified);
        assert!(d.unified.contains("-line 10\n+line ten\n"));
        assert!(d.unified.contains(" line 7\n"));
        assert!(!d.unified.contains("line 6\n"), "only 3 lines of context");
        assert!(d.unified.contains(" line 13\n"));
        assert!(!d.unified.contains("line 14\n"), "only 3 lines of context");
    }

    #[test]
    fn a_rewrite_too_large_to_compare_in_time_is_a_whole_file_replacement() {
        // Every line changed: Myers' search is quadratic here and passes the deadline.
        let old: String = (0..200_000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..200_000)
            .map(|i| format!("new {i}\n"))
            .collect::<String>()
            + "end";
        let d = file_diff("big.txt", Some(&old), &new);
        assert_eq!(d.shape, DiffShape::WholeFile);
        let mut lines = d.unified.lines();
        assert_eq!(lines.next(), Some("--- a/big.txt"));
        assert_eq!(lines.next(), Some("+++ b/big.txt"));
        assert_eq!(lines.next(), Some("@@ -1,200000 +1,200001 @@"));
        assert_eq!(lines.next(), Some("-old 0"));
        assert!(d.unified.contains("\n+new 0\n"));
        assert!(d.unified.ends_with("+end\n\\ No newline at end of file\n"));
        assert_eq!(
            d.unified.lines().filter(|l| l.starts_with('-')).count(),
            200_001
        );
        // A small change is still line by line.
        assert_eq!(file_diff("x", Some("a\n"), "b\n").shape, DiffShape::Lines);
    }

    #[test]
    fn identical_texts_give_an_empty_diff() {
        let d = file_diff("same.txt", Some("a\nb\n"), "a\nb\n");
        assert_eq!(d.unified, "");
    }

    #[test]
    fn absolute_paths_do_not_double_the_slash() {
        let d = file_diff("/other/root/x.txt", Some("a\n"), "b\n");
        assert!(d
            .unified
            .starts_with("--- a/other/root/x.txt\n+++ b/other/root/x.txt\n"));
    }

    #[test]
    fn missing_final_newline_is_marked() {
        let d = file_diff("x.txt", Some("a\n"), "a\nb");
        assert!(d.unified.contains("+b"), "{}", d.unified);
        assert!(
            d.unified.contains("No newline at end of file"),
            "{}",
            d.unified
        );
    }
}
