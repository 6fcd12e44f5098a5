//! Unit tests of confinement: escapes by `..`, absolute paths and links refused by the kernel,
//! atomic writes, listings, on real temporary folders.

use super::*;
use std::os::unix::fs::{symlink, PermissionsExt};

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
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    let ws = Workspace::open(vec![root.clone()]).unwrap();
    let root = ws.roots()[0].clone();
    let outside = std::fs::canonicalize(&outside).unwrap();
    Fixture {
        _tmp: tmp,
        root,
        outside,
        ws,
    }
}

fn assert_outside(err: WorkspaceError) {
    match &err {
        WorkspaceError::OutsideWorkspace { .. } => {}
        other => panic!("expected OutsideWorkspace, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("outside the workspace"), "{text}");
    assert!(text.contains("use a path inside the workspace"), "{text}");
}

#[test]
fn open_rejects_relative_and_missing_roots() {
    assert!(matches!(
        Workspace::open(vec![PathBuf::from("relative/dir")]),
        Err(WorkspaceError::InvalidRoot { .. })
    ));
    assert!(matches!(
        Workspace::open(vec![PathBuf::from("/definitely/not/here/tandem")]),
        Err(WorkspaceError::InvalidRoot { .. })
    ));
    assert!(matches!(
        Workspace::open(vec![]),
        Err(WorkspaceError::InvalidRoot { .. })
    ));
}

#[test]
fn resolve_normalises_dot_and_rejects_empty() {
    let f = fixture();
    let p = f.ws.resolve("./src/./main.rs").unwrap();
    assert_eq!(p.root_index, 0);
    assert_eq!(p.relative, PathBuf::from("src/main.rs"));
    assert_eq!(p.display, "src/main.rs");
    assert_eq!(f.ws.resolve(".").unwrap().display, ".");
    assert!(matches!(
        f.ws.resolve(""),
        Err(WorkspaceError::EmptyPath { .. })
    ));
    assert!(matches!(
        f.ws.resolve("  "),
        Err(WorkspaceError::EmptyPath { .. })
    ));
}

#[test]
fn dotdot_escape_is_refused_by_the_kernel() {
    let f = fixture();
    let p = f.ws.resolve("../outside/secret.txt").unwrap();
    // The `..` is kept for the kernel to judge, not stripped.
    assert_eq!(p.relative, PathBuf::from("../outside/secret.txt"));
    assert_outside(f.ws.read_bytes(&p).unwrap_err());
    let err = f.ws.read_bytes(&f.ws.resolve("../etc/passwd").unwrap());
    let text = err.unwrap_err().to_string();
    assert!(text.contains("`../etc/passwd`"), "{text}");
    assert!(text.contains(&f.root.display().to_string()), "{text}");
}

#[test]
fn nested_dotdot_escape_is_refused() {
    let f = fixture();
    std::fs::create_dir_all(f.root.join("a")).unwrap();
    let p = f.ws.resolve("a/../../outside/secret.txt").unwrap();
    assert_outside(f.ws.read_bytes(&p).unwrap_err());
    assert_outside(f.ws.write_atomic(&p, b"x", &|_| Ok(())).unwrap_err());
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "secret"
    );
    // `..` that stays inside the root is fine.
    std::fs::write(f.root.join("b.txt"), "b").unwrap();
    let inside = f.ws.resolve("a/../b.txt").unwrap();
    assert_eq!(f.ws.read_bytes(&inside).unwrap(), b"b");
}

#[test]
fn absolute_path_outside_is_refused() {
    let f = fixture();
    let path = f.outside.join("secret.txt");
    assert_outside(f.ws.resolve(path.to_str().unwrap()).unwrap_err());
    assert_outside(f.ws.resolve("/etc/passwd").unwrap_err());
    // A sibling whose name merely starts with the root's name is not
    // inside it: the prefix match is by whole components.
    let sibling = format!("{}-sibling/x", f.root.display());
    assert_outside(f.ws.resolve(&sibling).unwrap_err());
}

#[test]
fn absolute_path_inside_is_accepted() {
    let f = fixture();
    std::fs::create_dir_all(f.root.join("src")).unwrap();
    std::fs::write(f.root.join("src/lib.rs"), "fn x() {}").unwrap();
    let abs = f.root.join("src/lib.rs");
    let p = f.ws.resolve(abs.to_str().unwrap()).unwrap();
    assert_eq!(p.root_index, 0);
    assert_eq!(p.relative, PathBuf::from("src/lib.rs"));
    assert_eq!(p.display, "src/lib.rs");
    assert_eq!(f.ws.absolute(&p), abs);
    assert_eq!(f.ws.read_bytes(&p).unwrap(), b"fn x() {}");
    let root = f.ws.resolve(f.root.to_str().unwrap()).unwrap();
    assert_eq!(root.relative, PathBuf::new());
    assert_eq!(f.ws.absolute(&root), f.root);
}

#[test]
fn absolute_path_with_dotdot_out_of_root_is_refused() {
    let f = fixture();
    let sneaky = format!("{}/../outside/secret.txt", f.root.display());
    let p = f.ws.resolve(&sneaky).unwrap();
    assert_outside(f.ws.read_bytes(&p).unwrap_err());
}

#[test]
fn second_root_paths_display_absolute() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("notes.md"), "hi").unwrap();
    let ws = Workspace::open(vec![a.clone(), b.clone()]).unwrap();
    let b_canon = ws.roots()[1].clone();
    let p = ws
        .resolve(b_canon.join("notes.md").to_str().unwrap())
        .unwrap();
    assert_eq!(p.root_index, 1);
    assert_eq!(p.relative, PathBuf::from("notes.md"));
    assert_eq!(p.display, format!("{}/notes.md", b_canon.display()));
    assert_eq!(ws.read_bytes(&p).unwrap(), b"hi");
    // Relative paths always belong to the first root.
    assert_eq!(ws.resolve("notes.md").unwrap().root_index, 0);
}

#[test]
fn nested_roots_pick_the_longest_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let outer = tmp.path().join("outer");
    let inner = outer.join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    let ws = Workspace::open(vec![outer, inner]).unwrap();
    let path = ws.roots()[1].join("x.txt");
    let p = ws.resolve(path.to_str().unwrap()).unwrap();
    assert_eq!(p.root_index, 1);
    assert_eq!(p.relative, PathBuf::from("x.txt"));
}

#[test]
fn symlink_to_outside_file_refused_for_read_and_write() {
    let f = fixture();
    symlink(f.outside.join("secret.txt"), f.root.join("abs_link")).unwrap();
    symlink("../outside/secret.txt", f.root.join("rel_link")).unwrap();
    for name in ["abs_link", "rel_link"] {
        let p = f.ws.resolve(name).unwrap();
        assert_outside(f.ws.read_bytes(&p).unwrap_err());
        assert_outside(f.ws.read_text_if_exists(&p).unwrap_err());
        assert_outside(f.ws.write_atomic(&p, b"pwned", &|_| Ok(())).unwrap_err());
        // The link itself must survive a refused write.
        assert!(std::fs::symlink_metadata(f.root.join(name))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "secret"
    );
}

#[test]
fn symlinked_dir_outside_refused_for_list_read_and_write() {
    let f = fixture();
    symlink(&f.outside, f.root.join("out")).unwrap();
    let dir = f.ws.resolve("out").unwrap();
    assert_outside(f.ws.list_dir(&dir).unwrap_err());
    let file = f.ws.resolve("out/secret.txt").unwrap();
    assert_outside(f.ws.read_bytes(&file).unwrap_err());
    let new = f.ws.resolve("out/new.txt").unwrap();
    assert_outside(f.ws.write_atomic(&new, b"x", &|_| Ok(())).unwrap_err());
    assert!(!f.outside.join("new.txt").exists());
    let deeper = f.ws.resolve("out/sub/new.txt").unwrap();
    assert_outside(f.ws.write_atomic(&deeper, b"x", &|_| Ok(())).unwrap_err());
    assert!(!f.outside.join("sub").exists());
}

#[test]
fn absolute_symlink_is_refused_even_when_it_points_inside() {
    // RESOLVE_BENEATH refuses every absolute symlink; this pins that
    // conservative behaviour so a change in it is noticed.
    let f = fixture();
    std::fs::write(f.root.join("real.txt"), "x").unwrap();
    symlink(f.root.join("real.txt"), f.root.join("abs_alias")).unwrap();
    let p = f.ws.resolve("abs_alias").unwrap();
    assert_outside(f.ws.read_bytes(&p).unwrap_err());
}

#[test]
fn symlink_inside_root_is_written_through() {
    let f = fixture();
    std::fs::write(f.root.join("real.txt"), "old").unwrap();
    symlink("real.txt", f.root.join("alias.txt")).unwrap();
    let p = f.ws.resolve("alias.txt").unwrap();
    assert_eq!(
        f.ws.read_text_if_exists(&p).unwrap().as_deref(),
        Some("old")
    );
    f.ws.write_atomic(&p, b"new", &|_| Ok(())).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.root.join("real.txt")).unwrap(),
        "new"
    );
    assert!(std::fs::symlink_metadata(f.root.join("alias.txt"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn dangling_symlink_write_is_refused() {
    let f = fixture();
    symlink("nowhere.txt", f.root.join("dangling")).unwrap();
    let p = f.ws.resolve("dangling").unwrap();
    assert!(matches!(
        f.ws.write_atomic(&p, b"x", &|_| Ok(())),
        Err(WorkspaceError::DanglingSymlink { .. })
    ));
    assert!(!f.root.join("nowhere.txt").exists());
}

#[test]
fn write_creates_parents_atomically_and_keeps_permissions() {
    let f = fixture();
    let p = f.ws.resolve("deep/er/file.txt").unwrap();
    f.ws.write_atomic(&p, b"first", &|_| Ok(())).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.root.join("deep/er/file.txt")).unwrap(),
        "first"
    );

    let target = f.root.join("deep/er/file.txt");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o750)).unwrap();
    f.ws.write_atomic(&p, b"second", &|_| Ok(())).unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "second");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);

    // Only the target is left in the directory: no temp file remains.
    let names: Vec<String> = std::fs::read_dir(f.root.join("deep/er"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["file.txt".to_string()]);
}

#[test]
fn write_replaces_by_rename_not_in_place() {
    let f = fixture();
    let target = f.root.join("a.txt");
    std::fs::write(&target, "before").unwrap();
    // A reader holding the old file keeps seeing the old inode's bytes,
    // which is only true if the write went to a new file and was renamed.
    let mut held = std::fs::File::open(&target).unwrap();
    let p = f.ws.resolve("a.txt").unwrap();
    f.ws.write_atomic(&p, b"after", &|_| Ok(())).unwrap();
    let mut old = String::new();
    held.read_to_string(&mut old).unwrap();
    assert_eq!(old, "before");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "after");
}

#[test]
fn write_with_dotdot_after_missing_dir_creates_nothing() {
    let f = fixture();
    let p = f.ws.resolve("newdir/../../escape.txt").unwrap();
    let err = f.ws.write_atomic(&p, b"x", &|_| Ok(())).unwrap_err();
    assert!(
        matches!(err, WorkspaceError::UnresolvableParent { .. }),
        "{err:?}"
    );
    assert!(!f.root.join("newdir").exists());
}

#[test]
fn write_refuses_directories() {
    let f = fixture();
    std::fs::create_dir_all(f.root.join("d")).unwrap();
    let p = f.ws.resolve("d").unwrap();
    assert!(matches!(
        f.ws.write_atomic(&p, b"x", &|_| Ok(())),
        Err(WorkspaceError::NotAFile { .. })
    ));
    std::fs::write(f.root.join("plain"), "x").unwrap();
    let under_file = f.ws.resolve("plain/child.txt").unwrap();
    let err =
        f.ws.write_atomic(&under_file, b"x", &|_| Ok(()))
            .unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::NotADirectory { path } if path == "plain"),
        "{err:?}"
    );
    assert!(matches!(
        f.ws.read_bytes(&under_file),
        Err(WorkspaceError::NotFound { .. })
    ));
}

#[test]
fn read_text_if_exists_handles_missing_and_non_utf8() {
    let f = fixture();
    let missing = f.ws.resolve("missing.txt").unwrap();
    assert_eq!(f.ws.read_text_if_exists(&missing).unwrap(), None);
    std::fs::write(f.root.join("latin1.txt"), b"caf\xe9").unwrap();
    let p = f.ws.resolve("latin1.txt").unwrap();
    let err = f.ws.read_text_if_exists(&p).unwrap_err();
    assert!(matches!(err, WorkspaceError::NotUtf8 { .. }));
    assert!(err.to_string().contains("not valid UTF-8"));
    let not_found = f.ws.read_bytes(&missing).unwrap_err();
    assert!(not_found
        .to_string()
        .contains("`missing.txt` does not exist"));
}

#[test]
fn list_dir_is_sorted_and_typed() {
    let f = fixture();
    std::fs::create_dir_all(f.root.join("zdir")).unwrap();
    std::fs::write(f.root.join("b.txt"), "12345").unwrap();
    std::fs::write(f.root.join("a.txt"), "").unwrap();
    symlink("b.txt", f.root.join("c_link")).unwrap();
    let entries = f.ws.list_dir(&f.ws.resolve(".").unwrap()).unwrap();
    let summary: Vec<(&str, EntryKind)> =
        entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
    assert_eq!(
        summary,
        vec![
            ("a.txt", EntryKind::File),
            ("b.txt", EntryKind::File),
            ("c_link", EntryKind::Symlink),
            ("zdir", EntryKind::Dir),
        ]
    );
    assert_eq!(entries[0].size, 0);
    assert_eq!(entries[1].size, 5);
    let file = f.ws.resolve("b.txt").unwrap();
    assert!(matches!(
        f.ws.list_dir(&file),
        Err(WorkspaceError::NotADirectory { .. })
    ));
}

#[test]
fn canonical_relative_resolves_inside_links() {
    let f = fixture();
    std::fs::create_dir_all(f.root.join("real/sub")).unwrap();
    symlink("real", f.root.join("alias")).unwrap();
    let p = f.ws.resolve("alias/sub").unwrap();
    assert_eq!(
        f.ws.canonical_relative(&p).unwrap(),
        PathBuf::from("real/sub")
    );
    let root = f.ws.resolve(".").unwrap();
    assert_eq!(f.ws.canonical_relative(&root).unwrap(), PathBuf::new());
}

#[test]
fn own_files_are_protected_only_in_the_workspaces_opened_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("data")).unwrap();
    std::fs::write(root.join("tandem.toml"), "").unwrap();
    let own = protected::OwnFiles::new(
        Some(&root.join("tandem.toml")),
        Some(&root.join("data/tandem.sqlite3")),
    );
    let guarded = Workspace::open_protecting(vec![root.clone()], own).unwrap();
    let plain = Workspace::open(vec![root.clone()]).unwrap();
    for relative in ["tandem.toml", "data/tandem.sqlite3", "data/new-file"] {
        let why = guarded.protected_reason(0, Path::new(relative));
        assert!(
            why.as_deref().is_some_and(|w| w.contains("tandem's own")),
            "{relative}: {why:?}"
        );
        // A value, not a process global: another workspace protects nothing of it.
        assert_eq!(plain.protected_reason(0, Path::new(relative)), None);
    }
    assert_eq!(guarded.protected_reason(0, Path::new("src/main.rs")), None);
    assert!(guarded.protected_reason(7, Path::new("x")).is_some());
}

#[test]
fn a_capped_read_refuses_a_file_past_the_cap_without_reading_it_all() {
    let f = fixture();
    std::fs::write(f.root.join("ok.json"), "x".repeat(64)).unwrap();
    std::fs::write(f.root.join("big.json"), "x".repeat(65)).unwrap();
    let ok = f.ws.resolve("ok.json").unwrap();
    assert_eq!(
        f.ws.read_text_if_exists_capped(&ok, 64)
            .unwrap()
            .unwrap()
            .len(),
        64
    );
    let big = f.ws.resolve("big.json").unwrap();
    assert!(matches!(
        f.ws.read_text_if_exists_capped(&big, 64),
        Err(WorkspaceError::TooLarge { limit: 64, .. })
    ));
    let missing = f.ws.resolve("missing.json").unwrap();
    assert!(f
        .ws
        .read_text_if_exists_capped(&missing, 64)
        .unwrap()
        .is_none());
}
