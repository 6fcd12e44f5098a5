//! Workspace snapshots for checkpoints: what the `ignore` walk sees in the roots (files,
//! folders, symlinks, with their metadata), the state of one path as a checkpoint stores it, and
//! the confined operations that put a path back into a recorded state.
//!
//! Invariants: every read and every change goes through a root's `cap_std` handle, and a change
//! happens only in a parent folder whose real location (the kernel's path of the open folder)
//! is exactly the recorded one, so a folder swapped for a link since the turn cannot send a
//! restore elsewhere; `.git` and protected paths are never walked and never changed.
//! Does not: know sessions, turns or the store (the engine's `checkpoint` module does), or hash
//! file contents ([`content_hash`] is the one function it offers for that).

use std::io::{self, Read, Write};

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt, Permissions, PermissionsExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{cap_path, write::temp_name, Workspace};

/// Files larger than this are not captured: their change is listed, not restorable.
pub const MAX_CAPTURED_FILE_BYTES: u64 = 5 * 1024 * 1024;

/// The most entries one walk records; past it the walk stops and says so (a model that makes a
/// million files cannot make tandem hold a million entries).
pub const MAX_WALK_ENTRIES: usize = 200_000;

/// Threads of one walk (the `ignore` crate's parallel walker).
const WALK_THREADS: usize = 2;

/// How recently changed a file may be and still have its cached content trusted: file times
/// have a coarse granularity (a few milliseconds on ext4, two seconds on FAT), so a file written
/// twice within one tick keeps its size and times. Such a file is read again at the next walk
/// (git's "racily clean" rule).
const RACY_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

/// One path of a root: the root's index and the path relative to it.
///
/// Ordered by the path's bytes, not component by component: a walk's maps hold tens of
/// thousands of ids and `Path`'s own ordering parses both paths at every comparison. A folder
/// still sorts before what it holds (its path is a prefix of theirs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryId {
    pub root: usize,
    pub relative: PathBuf,
}

impl Ord for EntryId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::os::unix::ffi::OsStrExt;
        self.root.cmp(&other.root).then_with(|| {
            self.relative
                .as_os_str()
                .as_bytes()
                .cmp(other.relative.as_os_str().as_bytes())
        })
    }
}

impl PartialOrd for EntryId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// What a path holds, as a checkpoint records it (before or after a change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum FileState {
    Absent,
    File {
        mode: u32,
        size: u64,
        /// The content's [`content_hash`]; `None` when it was not captured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hash: Option<String>,
        /// Why the content was not captured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_captured: Option<String>,
    },
    Dir {
        mode: u32,
    },
    Symlink {
        target: String,
    },
    /// A path the walk ignores (`.gitignore`, `.ignore`): seen only as the entry itself, at
    /// the edge of what is walked (an ignored folder's contents are not looked at); never
    /// captured, never restored.
    Ignored {
        dir: bool,
        size: u64,
    },
}

/// Why an ignored path has no checkpoint.
pub const IGNORED_REASON: &str =
    "ignored by .gitignore or .ignore: tandem does not capture ignored paths";

impl FileState {
    /// Whether a path in state `self` is known to equal `other`: a file whose content was not
    /// captured equals nothing, because nobody can tell.
    pub fn same_as(&self, other: &FileState) -> bool {
        match (self, other) {
            (
                FileState::File {
                    mode: a_mode,
                    hash: Some(a),
                    ..
                },
                FileState::File {
                    mode: b_mode,
                    hash: Some(b),
                    ..
                },
            ) => a == b && (a_mode & 0o7777) == (b_mode & 0o7777),
            (FileState::File { .. }, FileState::File { .. }) => false,
            // Never read: nobody can tell.
            (FileState::Ignored { .. }, _) | (_, FileState::Ignored { .. }) => false,
            (FileState::Dir { mode: a }, FileState::Dir { mode: b }) => {
                (a & 0o7777) == (b & 0o7777)
            }
            (a, b) => a == b,
        }
    }

    pub fn hash(&self) -> Option<&str> {
        match self {
            FileState::File { hash, .. } => hash.as_deref(),
            _ => None,
        }
    }

    pub fn not_captured(&self) -> Option<&str> {
        match self {
            FileState::File { not_captured, .. } => not_captured.as_deref(),
            FileState::Ignored { .. } => Some(IGNORED_REASON),
            _ => None,
        }
    }
}

/// The SHA-256 of `bytes` in lowercase hex: the key contents are stored under.
pub fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest.iter() {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    out
}

/// The metadata a walk compares to tell that an entry did not change without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatKey {
    pub kind: StatKind,
    pub mode: u32,
    pub size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    dev: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatKind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device: never read, never restored.
    Other,
}

/// Builds a [`StatKey`] from either metadata type: the standard library's (the walk) and
/// cap-std's (a confined open), whose `MetadataExt` traits have the same methods.
macro_rules! stat_key {
    ($meta:expr) => {{
        let meta = $meta;
        let file_type = meta.file_type();
        let kind = if file_type.is_symlink() {
            StatKind::Symlink
        } else if file_type.is_dir() {
            StatKind::Dir
        } else if file_type.is_file() {
            StatKind::File
        } else {
            StatKind::Other
        };
        StatKey {
            kind,
            mode: meta.mode(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }};
}

impl StatKey {
    pub fn of(meta: &std::fs::Metadata) -> StatKey {
        use std::os::unix::fs::MetadataExt;
        stat_key!(meta)
    }

    fn of_cap(meta: &cap_std::fs::Metadata) -> StatKey {
        use cap_std::fs::MetadataExt;
        stat_key!(meta)
    }

    /// Whether the entry changed so recently before `since` that equal metadata does not prove
    /// equal content (see [`RACY_WINDOW`]).
    pub fn racy(&self, since: SystemTime) -> bool {
        let threshold = since
            .checked_sub(RACY_WINDOW)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        self.ctime.0 >= threshold || self.mtime.0 >= threshold
    }
}

/// What one walk saw: every entry with its metadata, sorted by id (a folder before what it
/// holds), so two walks compare by one merge, without a lookup per entry.
#[derive(Debug, Default)]
pub struct Walk {
    pub entries: Vec<(EntryId, StatKey)>,
    /// The entries the walk ignored, where it stopped (an ignored file, or an ignored folder
    /// itself, not what it holds), sorted by id: a command's change to one is reported as
    /// not captured instead of passing unseen.
    pub ignored: Vec<(EntryId, StatKey)>,
    /// When the walk started (for [`StatKey::racy`]).
    pub started: Option<SystemTime>,
    /// Set when the walk stopped at [`MAX_WALK_ENTRIES`].
    pub truncated: bool,
}

impl Workspace {
    /// Walk every root the way the search tools do (`.gitignore`, `.ignore` and git's excludes
    /// honoured, in git repositories and other folders alike), hidden files included, `.git`
    /// and protected paths left out, links not followed.
    pub fn walk_for_snapshot(&self) -> Walk {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Mutex;

        /// A walker thread's entries, handed over whole when the thread is done.
        struct Batch<'a> {
            local: Vec<(EntryId, StatKey)>,
            shared: &'a Mutex<Vec<(EntryId, StatKey)>>,
        }
        impl Drop for Batch<'_> {
            fn drop(&mut self) {
                let mut shared = self
                    .shared
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                shared.append(&mut self.local);
            }
        }

        let started = SystemTime::now();
        let collected: Mutex<Vec<(EntryId, StatKey)>> = Mutex::new(Vec::new());
        let count = AtomicUsize::new(0);
        let truncated = AtomicBool::new(false);
        for (root, root_path) in self.roots().iter().enumerate() {
            let mut builder = ignore::WalkBuilder::new(root_path);
            builder
                .hidden(false)
                .follow_links(false)
                .require_git(false)
                // The walk is most of a command's checkpoint: both cores of a small machine.
                .threads(WALK_THREADS)
                .filter_entry(|entry| entry.file_name() != ".git");
            builder.build_parallel().run(|| {
                let mut batch = Batch {
                    local: Vec::new(),
                    shared: &collected,
                };
                let (count, truncated) = (&count, &truncated);
                Box::new(move |entry| {
                    use ignore::WalkState;
                    let Ok(entry) = entry else {
                        return WalkState::Continue;
                    };
                    let Ok(relative) = entry.path().strip_prefix(root_path) else {
                        return WalkState::Continue;
                    };
                    if relative.as_os_str().is_empty() {
                        return WalkState::Continue;
                    }
                    if self.protected_reason(root, relative).is_some() {
                        return WalkState::Skip;
                    }
                    let Ok(meta) = entry.metadata() else {
                        return WalkState::Continue;
                    };
                    if count.fetch_add(1, Ordering::Relaxed) >= MAX_WALK_ENTRIES {
                        truncated.store(true, Ordering::Relaxed);
                        return WalkState::Quit;
                    }
                    batch.local.push((
                        EntryId {
                            root,
                            relative: relative.to_path_buf(),
                        },
                        StatKey::of(&meta),
                    ));
                    WalkState::Continue
                })
            });
        }
        let mut entries = collected
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let ignored = self.ignored_edges(&entries, count.load(Ordering::Relaxed));
        Walk {
            entries,
            ignored,
            started: Some(started),
            truncated: truncated.into_inner(),
        }
    }

    /// The children of every walked folder (and of each root) that the walk did not yield:
    /// what `.gitignore` and `.ignore` hid, minus `.git` and protected paths. One listing per
    /// folder and a `stat` per ignored child; nothing below an ignored folder.
    fn ignored_edges(
        &self,
        entries: &[(EntryId, StatKey)],
        walked: usize,
    ) -> Vec<(EntryId, StatKey)> {
        use std::collections::HashSet;
        let seen: HashSet<&EntryId> = entries.iter().map(|(id, _)| id).collect();
        let mut folders: Vec<EntryId> = (0..self.roots().len())
            .map(|root| EntryId {
                root,
                relative: PathBuf::new(),
            })
            .collect();
        folders.extend(
            entries
                .iter()
                .filter(|(_, key)| key.kind == StatKind::Dir)
                .map(|(id, _)| id.clone()),
        );
        let mut ignored = Vec::new();
        let mut budget = MAX_WALK_ENTRIES.saturating_sub(walked);
        for folder in folders {
            let path = self.roots()[folder.root].join(&folder.relative);
            let Ok(listing) = std::fs::read_dir(&path) else {
                continue;
            };
            for child in listing.flatten() {
                let name = child.file_name();
                if name == ".git" {
                    continue;
                }
                let id = EntryId {
                    root: folder.root,
                    relative: folder.relative.join(&name),
                };
                if seen.contains(&id) || self.protected_reason(id.root, &id.relative).is_some() {
                    continue;
                }
                let Ok(meta) = std::fs::symlink_metadata(child.path()) else {
                    continue;
                };
                if budget == 0 {
                    break;
                }
                budget -= 1;
                ignored.push((id, StatKey::of(&meta)));
            }
        }
        ignored.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        ignored
    }

    /// The state of one path now, reading a file's content when `read` allows it (`None` for
    /// the content of a file over [`MAX_CAPTURED_FILE_BYTES`] or one that cannot be read: then
    /// the state says why). The metadata returned is the open file's own, so content and key
    /// belong together; `racy` is true when the file changed while it was read.
    pub fn capture(&self, id: &EntryId) -> io::Result<Captured> {
        let dir = self.root_dir(id.root);
        let rel = cap_path(&id.relative);
        let meta = match dir.symlink_metadata(rel) {
            Ok(meta) => meta,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(Captured {
                    state: FileState::Absent,
                    key: None,
                    content: None,
                })
            }
            Err(e) => return Err(e),
        };
        let file_type = meta.file_type();
        if file_type.is_dir() {
            return Ok(Captured {
                state: FileState::Dir {
                    mode: meta.permissions().mode(),
                },
                key: Some(StatKey::of_cap(&meta)),
                content: None,
            });
        }
        if file_type.is_symlink() {
            let target = self.read_link_confined(id)?;
            return Ok(Captured {
                state: FileState::Symlink {
                    target: target.to_string_lossy().into_owned(),
                },
                key: Some(StatKey::of_cap(&meta)),
                content: None,
            });
        }
        if !file_type.is_file() {
            return Ok(Captured {
                state: FileState::File {
                    mode: meta.permissions().mode(),
                    size: 0,
                    hash: None,
                    not_captured: Some("not a regular file (a FIFO, socket or device)".to_owned()),
                },
                key: None,
                content: None,
            });
        }
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        let mut file = dir.open_with(rel, &options)?;
        let before = file.metadata()?;
        let mode = before.permissions().mode();
        let size = before.len();
        if !before.is_file() || size > MAX_CAPTURED_FILE_BYTES {
            let why = if before.is_file() {
                format!("over 5 MiB ({size} bytes): its content was not captured")
            } else {
                "not a regular file: its content was not captured".to_owned()
            };
            return Ok(Captured {
                state: FileState::File {
                    mode,
                    size,
                    hash: None,
                    not_captured: Some(why),
                },
                key: None,
                content: None,
            });
        }
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut file)
            .take(MAX_CAPTURED_FILE_BYTES + 1)
            .read_to_end(&mut bytes)?;
        let key = StatKey::of_cap(&file.metadata()?);
        let changed_while_read = key != StatKey::of_cap(&before);
        if bytes.len() as u64 > MAX_CAPTURED_FILE_BYTES {
            return Ok(Captured {
                state: FileState::File {
                    mode,
                    size: bytes.len() as u64,
                    hash: None,
                    not_captured: Some(
                        "over 5 MiB: it grew while it was read, so its content was not captured"
                            .to_owned(),
                    ),
                },
                key: None,
                content: None,
            });
        }
        let hash = content_hash(&bytes);
        Ok(Captured {
            state: FileState::File {
                mode,
                size: bytes.len() as u64,
                hash: Some(hash),
                not_captured: None,
            },
            key: (!changed_while_read).then_some(key),
            content: Some(bytes),
        })
    }

    fn read_link_confined(&self, id: &EntryId) -> io::Result<PathBuf> {
        let (parent, name) = self.open_parent(id)?;
        let target = rustix::fs::readlinkat(&parent, name.as_os_str(), Vec::new())?;
        let target: std::ffi::OsString =
            std::os::unix::ffi::OsStringExt::from_vec(target.into_bytes());
        Ok(PathBuf::from(target))
    }

    /// The parent folder of `id`, opened through the root's handle, and the entry's name;
    /// refused unless the folder really is where the path says (no link on the way).
    fn open_parent(&self, id: &EntryId) -> io::Result<(Dir, PathBuf)> {
        let name = id
            .relative
            .file_name()
            .map(PathBuf::from)
            .ok_or_else(|| io::Error::other("a path without a name"))?;
        let parent_rel = id.relative.parent().unwrap_or(Path::new(""));
        let root_dir = self.root_dir(id.root);
        let parent = if parent_rel.as_os_str().is_empty() {
            root_dir.try_clone()?
        } else {
            root_dir.open_dir(parent_rel)?
        };
        use std::os::fd::{AsFd, AsRawFd};
        let real = std::fs::read_link(format!("/proc/self/fd/{}", parent.as_fd().as_raw_fd()))?;
        let expected = self.roots()[id.root].join(parent_rel);
        if real != expected {
            return Err(io::Error::other(format!(
                "the folder `{}` is not where it was (a link or a move replaced it)",
                parent_rel.display()
            )));
        }
        Ok((parent, name))
    }

    /// Put `id` into `target`: remove what is there if it is of another kind (a folder only
    /// when empty), then write the file (atomically, with its mode), make the folder or the
    /// link. `content` is the file's bytes for a [`FileState::File`] target.
    pub fn restore_entry(
        &self,
        id: &EntryId,
        target: &FileState,
        content: Option<&[u8]>,
    ) -> Result<(), String> {
        if let Some(why) = self.protected_reason(id.root, &id.relative) {
            return Err(format!("protected: {why}"));
        }
        if matches!(target, FileState::Ignored { .. }) {
            return Err(IGNORED_REASON.to_owned());
        }
        let (parent, name) = self.open_parent(id).map_err(|e| e.to_string())?;
        let current = parent.symlink_metadata(&name);
        let current_kind = match &current {
            Ok(meta) if meta.is_dir() => Some(StatKind::Dir),
            Ok(meta) if meta.file_type().is_symlink() => Some(StatKind::Symlink),
            Ok(meta) if meta.is_file() => Some(StatKind::File),
            Ok(_) => Some(StatKind::Other),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e.to_string()),
        };
        let wanted_kind = match target {
            FileState::Absent => None,
            FileState::File { .. } => Some(StatKind::File),
            FileState::Dir { .. } => Some(StatKind::Dir),
            FileState::Symlink { .. } => Some(StatKind::Symlink),
            FileState::Ignored { .. } => return Err(IGNORED_REASON.to_owned()),
        };
        // Clear the way when the kind differs (a file stays in place for an atomic replace).
        if current_kind.is_some()
            && (current_kind != wanted_kind || current_kind == Some(StatKind::Symlink))
        {
            let removed = if current_kind == Some(StatKind::Dir) {
                parent.remove_dir(&name)
            } else {
                parent.remove_file(&name)
            };
            removed.map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTEMPTY) | Some(libc::EEXIST) => {
                    "a folder that holds files no checkpoint recorded (ignored or new ones) is in the way; move them and rewind again".to_owned()
                }
                _ => e.to_string(),
            })?;
        }
        match target {
            FileState::Absent => Ok(()),
            FileState::Ignored { .. } => Err(IGNORED_REASON.to_owned()),
            FileState::Dir { mode } => {
                if current_kind != Some(StatKind::Dir) {
                    parent.create_dir(&name).map_err(|e| e.to_string())?;
                }
                parent
                    .set_permissions(&name, Permissions::from_mode(*mode & 0o7777))
                    .map_err(|e| e.to_string())
            }
            FileState::Symlink { target } => {
                rustix::fs::symlinkat(target.as_str(), &parent, name.as_os_str())
                    .map_err(|e| e.to_string())
            }
            FileState::File { mode, .. } => {
                let Some(bytes) = content else {
                    return Err("its content was not captured".to_owned());
                };
                let temp = temp_name(name.as_os_str());
                let mut options = OpenOptions::new();
                options.write(true).create_new(true);
                let written = (|| -> io::Result<()> {
                    let mut file = parent.open_with(&temp, &options)?;
                    file.write_all(bytes)?;
                    file.set_permissions(Permissions::from_mode(*mode & 0o7777))?;
                    file.sync_all()?;
                    drop(file);
                    parent.rename(&temp, &parent, &name)
                })();
                if let Err(e) = written {
                    let _ = parent.remove_file(&temp);
                    return Err(e.to_string());
                }
                Ok(())
            }
        }
    }
}

/// One path's state now, with the metadata that identifies it and the content read.
#[derive(Debug)]
pub struct Captured {
    pub state: FileState,
    /// `None` when the entry cannot be cached (it changed while read, or was not read).
    pub key: Option<StatKey>,
    pub content: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(path: &str) -> EntryId {
        EntryId {
            root: 0,
            relative: PathBuf::from(path),
        }
    }

    #[test]
    fn ids_order_by_bytes_with_a_folder_before_what_it_holds() {
        let mut ids = [id("a/b"), id("a-b"), id("a"), id("a/b/c"), id("B")];
        ids.sort();
        let order: Vec<_> = ids
            .iter()
            .map(|i| i.relative.display().to_string())
            .collect();
        assert_eq!(order, ["B", "a", "a-b", "a/b", "a/b/c"]);
    }

    #[test]
    fn states_are_the_same_only_when_their_content_and_mode_are_known_equal() {
        let file = |mode, hash: Option<&str>| FileState::File {
            mode,
            size: 1,
            hash: hash.map(str::to_owned),
            not_captured: None,
        };
        assert!(file(0o100644, Some("h")).same_as(&file(0o644, Some("h"))));
        assert!(!file(0o100644, Some("h")).same_as(&file(0o100755, Some("h"))));
        assert!(!file(0o644, Some("h")).same_as(&file(0o644, Some("i"))));
        // Not captured: nobody can tell.
        assert!(!file(0o644, None).same_as(&file(0o644, None)));
        let ignored = FileState::Ignored {
            dir: false,
            size: 1,
        };
        assert!(!ignored.same_as(&ignored.clone()));
        assert!(FileState::Dir { mode: 0o40755 }.same_as(&FileState::Dir { mode: 0o755 }));
        assert!(FileState::Absent.same_as(&FileState::Absent));
        assert_eq!(ignored.not_captured(), Some(IGNORED_REASON));
    }

    #[test]
    fn a_restore_refuses_a_folder_swapped_for_a_link_and_protected_paths() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        let ws = Workspace::open(vec![root.clone()]).unwrap();
        let target = FileState::File {
            mode: 0o644,
            size: 2,
            hash: Some(content_hash(b"x\n")),
            not_captured: None,
        };
        ws.restore_entry(&id("sub/f.txt"), &target, Some(b"x\n"))
            .unwrap();
        assert_eq!(std::fs::read(root.join("sub/f.txt")).unwrap(), b"x\n");
        // The folder becomes a link to somewhere else: the restore must not follow it.
        std::fs::remove_dir_all(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("sub")).unwrap();
        let refused = ws
            .restore_entry(&id("sub/f.txt"), &target, Some(b"x\n"))
            .unwrap_err();
        assert!(refused.contains("outside"), "{refused}");
        assert!(!outside.path().join("f.txt").exists());
        // A link to another folder inside the root is refused too: the recorded folder is gone.
        std::fs::remove_file(root.join("sub")).unwrap();
        std::fs::create_dir(root.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink("elsewhere", root.join("sub")).unwrap();
        let refused = ws
            .restore_entry(&id("sub/f.txt"), &target, Some(b"x\n"))
            .unwrap_err();
        assert!(refused.contains("not where it was"), "{refused}");
        assert!(!root.join("elsewhere/f.txt").exists());
        let protected = ws
            .restore_entry(&id(".git/config"), &target, Some(b"x\n"))
            .unwrap_err();
        assert!(protected.starts_with("protected"), "{protected}");
    }

    #[test]
    fn a_walk_lists_ignored_entries_only_at_its_edge() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join(".gitignore"), "build/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("build/deep")).unwrap();
        std::fs::write(root.join("build/deep/x.o"), "o").unwrap();
        std::fs::write(root.join("run.log"), "l").unwrap();
        std::fs::write(root.join("kept.txt"), "k").unwrap();
        std::fs::create_dir(root.join(".git")).unwrap();
        let walk = Workspace::open(vec![root]).unwrap().walk_for_snapshot();
        let names = |list: &[(EntryId, StatKey)]| -> Vec<String> {
            list.iter()
                .map(|(i, _)| i.relative.display().to_string())
                .collect()
        };
        assert_eq!(names(&walk.entries), [".gitignore", "kept.txt"]);
        assert_eq!(names(&walk.ignored), ["build", "run.log"]);
    }
}
