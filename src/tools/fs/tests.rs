//! Unit tests of the file tools on real temporary workspaces.

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
