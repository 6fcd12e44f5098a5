//! Unified diffs of proposed file changes, built with the `similar` crate.

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
}

/// Lines of unchanged context around each hunk, as in `diff -u`.
const CONTEXT_LINES: usize = 3;

/// Builds the diff between `old_text` (`None` for a new file) and `new_text`.
/// Headers are `--- a/PATH` and `+++ b/PATH`, with `--- /dev/null` for a new
/// file, as git prints them.
pub fn file_diff(path: &str, old_text: Option<&str>, new_text: &str) -> FileDiff {
    let old_header = match old_text {
        Some(_) => prefixed("a", path),
        None => "/dev/null".to_string(),
    };
    let new_header = prefixed("b", path);
    let unified = unified_diff(old_text.unwrap_or(""), new_text, &old_header, &new_header);
    FileDiff {
        path: path.to_string(),
        old_text: old_text.map(str::to_string),
        new_text: new_text.to_string(),
        unified,
    }
}

/// A unified diff between two texts with the given header names. Identical
/// texts give an empty string.
pub fn unified_diff(old: &str, new: &str, old_header: &str, new_header: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .header(old_header, new_header)
        .to_string()
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
