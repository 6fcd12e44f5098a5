//! Workspace roots, kernel-enforced path confinement and atomic writes.
//!
//! Every open, create and rename goes through a `cap_std::fs::Dir` handle for
//! the root the path belongs to. On Linux cap-std resolves paths with
//! `openat2(RESOLVE_BENEATH)`, so `..` escapes and symlinks that leave the
//! root are refused by the kernel rather than by string checks here. The only
//! lexical step is mapping an absolute path onto the root it starts with.

pub mod diff;
pub mod protected;
pub mod snapshot;
mod write;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cap_std::fs::{Dir, OpenOptions, Permissions};

/// A set of workspace roots. Cloning is cheap: the roots live behind an `Arc`.
#[derive(Clone)]
pub struct Workspace {
    inner: Arc<Inner>,
}

struct Inner {
    /// Canonical absolute root paths, index-aligned with `dirs`.
    roots: Vec<PathBuf>,
    /// The roots as the caller spelled them, so an absolute path written with
    /// a non-canonical spelling of a root (for example through a symlinked
    /// parent) still maps onto that root.
    given: Vec<PathBuf>,
    /// Capability handles: the only way this module touches the filesystem.
    dirs: Vec<Dir>,
    /// tandem's own files, protected wherever they are (see [`protected::OwnFiles`]).
    own_files: protected::OwnFiles,
}

impl fmt::Debug for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workspace")
            .field("roots", &self.inner.roots)
            .finish()
    }
}

/// A path that has been assigned to one workspace root.
///
/// `relative` may still contain `..` components: whether they stay inside the
/// root is decided by the kernel when the path is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspacePath {
    pub root_index: usize,
    pub relative: PathBuf,
    /// The path as shown to the user and the model: relative to the root and
    /// `/`-separated for root 0, prefixed with the root's absolute path for
    /// the other roots.
    pub display: String,
}

impl fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

/// What kind of filesystem object a directory entry is (symlinks not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntryInfo {
    pub name: String,
    pub kind: EntryKind,
    pub size: u64,
}

/// Errors from workspace operations. Each message names the path, the cause
/// and what to do next, because the model reads them as tool results.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("the path is empty; pass a path relative to the workspace root {root} or an absolute path inside it")]
    EmptyPath { root: String },

    #[error("path `{path}` resolves outside the workspace {roots}; use a path inside the workspace (`..` or symlinks that leave the root, and absolute symlinks, are refused)")]
    OutsideWorkspace { path: String, roots: String },

    #[error("`{path}` does not exist; check the name with list_dir or glob")]
    NotFound { path: String },

    #[error("`{path}` is a directory or special file, not a regular file; use list_dir to see a directory's contents")]
    NotAFile { path: String },

    #[error("`{path}` is not a directory; use read_file to read a file")]
    NotADirectory { path: String },

    #[error("workspace root {path} is unusable: {reason}; pass an absolute path to an existing directory")]
    InvalidRoot { path: PathBuf, reason: String },

    #[error("`{path}` is not valid UTF-8 text; only UTF-8 text files can be read as text or edited, so use the shell tool for this file")]
    NotUtf8 { path: String },

    #[error("`{path}` is a symlink whose target does not exist; write to the target path instead")]
    DanglingSymlink { path: String },

    #[error("`{path}` uses `..` after a directory that does not exist yet, so it cannot be resolved; use a path without `..`")]
    UnresolvableParent { path: String },

    /// The directory the write was about to land in is not one the agent may write (checked on
    /// the directory actually opened, after every link was followed).
    #[error("`{path}` lands in `{landing}`, which is protected: {reason}; nothing was written. Ask the user to make this change themselves")]
    ProtectedLanding {
        path: String,
        landing: String,
        reason: String,
    },

    #[error("`{path}` is larger than the {limit} bytes tandem reads of it; make it smaller")]
    TooLarge { path: String, limit: u64 },

    #[error("could not {op} `{path}`: {source}; check that the path is accessible and try again")]
    Io {
        path: String,
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

impl WorkspaceError {
    /// True when the error means "this path does not exist".
    pub fn is_not_found(&self) -> bool {
        matches!(self, WorkspaceError::NotFound { .. })
    }
}

/// Where a write lands, worked out before anything is changed.
struct WritePlan {
    /// The directory of the file to replace, relative to the root, with a
    /// symlink at the requested path already resolved to its target.
    parent: PathBuf,
    file_name: OsString,
    permissions: Option<Permissions>,
    /// Parent directories to create, outermost first.
    missing_dirs: Vec<PathBuf>,
}

/// A counter that keeps temp file names unique among concurrent writers in
/// this process; the pid keeps them unique across processes.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// How many bytes of the target's name go into a temp file name, so the temp
/// name stays below the usual 255-byte limit on a file name.
const TEMP_NAME_STEM_MAX: usize = 100;

impl Workspace {
    /// Opens the given roots with no files of tandem's own to protect (tests, benchmarks); the
    /// faces use [`Workspace::open_protecting`].
    pub fn open(roots: Vec<PathBuf>) -> Result<Workspace, WorkspaceError> {
        Workspace::open_protecting(roots, protected::OwnFiles::default())
    }

    /// Opens the given roots. Each must be an absolute path to an existing
    /// directory; it is canonicalized so absolute paths can be mapped onto it. `own_files`
    /// (tandem's config and data) are protected from every write through this workspace and
    /// mounted read-only for its commands.
    pub fn open_protecting(
        roots: Vec<PathBuf>,
        own_files: protected::OwnFiles,
    ) -> Result<Workspace, WorkspaceError> {
        if roots.is_empty() {
            return Err(WorkspaceError::InvalidRoot {
                path: PathBuf::new(),
                reason: "no workspace root was given".to_string(),
            });
        }
        let mut canonical = Vec::with_capacity(roots.len());
        let mut dirs = Vec::with_capacity(roots.len());
        for root in &roots {
            if !root.is_absolute() {
                return Err(WorkspaceError::InvalidRoot {
                    path: root.clone(),
                    reason: "the path is not absolute".to_string(),
                });
            }
            let canon = std::fs::canonicalize(root).map_err(|e| WorkspaceError::InvalidRoot {
                path: root.clone(),
                reason: e.to_string(),
            })?;
            if !canon.is_dir() {
                return Err(WorkspaceError::InvalidRoot {
                    path: root.clone(),
                    reason: "it is not a directory".to_string(),
                });
            }
            let dir = Dir::open_ambient_dir(&canon, cap_std::ambient_authority()).map_err(|e| {
                WorkspaceError::InvalidRoot {
                    path: root.clone(),
                    reason: e.to_string(),
                }
            })?;
            canonical.push(canon);
            dirs.push(dir);
        }
        Ok(Workspace {
            inner: Arc::new(Inner {
                roots: canonical,
                given: roots,
                dirs,
                own_files,
            }),
        })
    }

    /// tandem's own files this workspace protects.
    pub fn own_files(&self) -> &protected::OwnFiles {
        &self.inner.own_files
    }

    /// Why the agent may not write `relative` of root `root_index` (see
    /// [`protected::protected_reason`]), or `None` if it may.
    pub fn protected_reason(&self, root_index: usize, relative: &Path) -> Option<String> {
        let Some(root) = self.inner.roots.get(root_index) else {
            return Some("it is outside every workspace root".to_owned());
        };
        let absolute = root.join(relative);
        protected::protected_reason(relative, &absolute, &self.inner.own_files)
    }

    /// The canonical absolute roots, in the order they were given.
    pub fn roots(&self) -> &[PathBuf] {
        &self.inner.roots
    }

    /// Why the workspace is no longer where the session opened it, if it is not: a root's
    /// path now names another directory than the one held open (the folder was renamed or
    /// replaced, and perhaps a new one made at the old path), or nothing. File tools write
    /// through the open directory and commands run at the path, so they would work on two
    /// different trees; the session must stop instead. Two `stat` calls per root.
    pub fn moved(&self) -> Option<String> {
        for (path, dir) in self.inner.roots.iter().zip(&self.inner.dirs) {
            let held = rustix::fs::fstat(dir);
            let now = rustix::fs::stat(path);
            let same = match (&held, &now) {
                (Ok(held), Ok(now)) => held.st_dev == now.st_dev && held.st_ino == now.st_ino,
                _ => false,
            };
            if !same {
                return Some(format!(
                    "the workspace folder {} was moved, replaced or deleted while this session was open, so tandem stopped rather than work on two different folders; start a new session in the folder you mean",
                    path.display()
                ));
            }
        }
        None
    }

    /// The capability handle for root `index`.
    ///
    /// Panics if `index` is out of range, like slice indexing: indices only
    /// come from `WorkspacePath`s this workspace produced.
    pub fn root_dir(&self, index: usize) -> &Dir {
        &self.inner.dirs[index]
    }

    /// Assigns a user-supplied path to a root.
    ///
    /// Relative paths belong to root 0. Absolute paths belong to the root
    /// they lexically start with (the longest match wins, so nested roots
    /// work); anything else is outside the workspace. `.` components are
    /// dropped; `..` components are kept for the kernel to judge.
    pub fn resolve(&self, user_path: &str) -> Result<WorkspacePath, WorkspaceError> {
        if user_path.trim().is_empty() {
            return Err(WorkspaceError::EmptyPath {
                root: self.inner.roots[0].display().to_string(),
            });
        }
        let path = Path::new(user_path);
        let (root_index, rest) = if path.is_absolute() {
            match self.root_for_absolute(path) {
                Some(found) => found,
                None => {
                    return Err(WorkspaceError::OutsideWorkspace {
                        path: user_path.to_string(),
                        roots: self.roots_description(),
                    })
                }
            }
        } else {
            (0, path)
        };
        let mut relative = PathBuf::new();
        for component in rest.components() {
            match component {
                Component::Normal(part) => relative.push(part),
                Component::ParentDir => relative.push(".."),
                Component::CurDir => {}
                // A root or prefix inside the remainder cannot happen after
                // stripping a root, but refusing is the safe answer.
                Component::RootDir | Component::Prefix(_) => {
                    return Err(WorkspaceError::OutsideWorkspace {
                        path: user_path.to_string(),
                        roots: self.roots_description(),
                    })
                }
            }
        }
        let display = self.display_path(root_index, &relative);
        Ok(WorkspacePath {
            root_index,
            relative,
            display,
        })
    }

    /// Finds the root an absolute path starts with, comparing whole
    /// components against both the canonical and the given spelling.
    fn root_for_absolute<'p>(&self, path: &'p Path) -> Option<(usize, &'p Path)> {
        let mut best: Option<(usize, &'p Path, usize)> = None;
        let candidates = self
            .inner
            .roots
            .iter()
            .enumerate()
            .chain(self.inner.given.iter().enumerate());
        for (index, root) in candidates {
            if let Ok(rest) = path.strip_prefix(root) {
                let depth = root.components().count();
                if best.is_none_or(|(_, _, d)| depth > d) {
                    best = Some((index, rest, depth));
                }
            }
        }
        best.map(|(index, rest, _)| (index, rest))
    }

    /// How a path relative to root `root_index` is shown to the user and
    /// the model (see `WorkspacePath::display`).
    pub fn display_path(&self, root_index: usize, relative: &Path) -> String {
        if root_index == 0 {
            if relative.as_os_str().is_empty() {
                ".".to_string()
            } else {
                slashed(relative)
            }
        } else {
            slashed(&self.inner.roots[root_index].join(relative))
        }
    }

    fn roots_description(&self) -> String {
        let roots: Vec<String> = self
            .inner
            .roots
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        if roots.len() == 1 {
            format!("root {}", roots[0])
        } else {
            format!("roots {}", roots.join(", "))
        }
    }

    /// The absolute path for display or as a shell working directory. It is
    /// not canonical and must not be used to open files.
    pub fn absolute(&self, p: &WorkspacePath) -> PathBuf {
        if p.relative.as_os_str().is_empty() {
            self.inner.roots[p.root_index].clone()
        } else {
            self.inner.roots[p.root_index].join(&p.relative)
        }
    }

    /// Maps an I/O error on `p` to a workspace error, recognising cap-std's
    /// sandbox-escape error.
    pub fn map_io(&self, p: &WorkspacePath, op: &'static str, err: io::Error) -> WorkspaceError {
        if is_escape(&err) {
            WorkspaceError::OutsideWorkspace {
                path: p.display.clone(),
                roots: format!("root {}", self.inner.roots[p.root_index].display()),
            }
        } else if matches!(
            err.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
        ) {
            // ENOTDIR means a parent component is a file, so the path
            // itself does not exist either.
            WorkspaceError::NotFound {
                path: p.display.clone(),
            }
        } else {
            WorkspaceError::Io {
                path: p.display.clone(),
                op,
                source: err,
            }
        }
    }

    /// Opens a regular file for reading, confined to its root.
    pub fn open_file(&self, p: &WorkspacePath) -> Result<cap_std::fs::File, WorkspaceError> {
        let dir = self.root_dir(p.root_index);
        let rel = cap_path(&p.relative);
        // Checking the type first keeps us from opening a FIFO, which would
        // block, or a directory, which opens fine but cannot be read.
        let meta = dir
            .metadata(rel)
            .map_err(|e| self.map_io(p, "inspect", e))?;
        if !meta.is_file() {
            return Err(WorkspaceError::NotAFile {
                path: p.display.clone(),
            });
        }
        let file = dir.open(rel).map_err(|e| self.map_io(p, "open", e))?;
        // The path may have been swapped between the two calls; the handle
        // is what we read, so check the handle too.
        let meta = file.metadata().map_err(|e| self.map_io(p, "inspect", e))?;
        if !meta.is_file() {
            return Err(WorkspaceError::NotAFile {
                path: p.display.clone(),
            });
        }
        Ok(file)
    }

    /// Reads a whole file.
    pub fn read_bytes(&self, p: &WorkspacePath) -> Result<Vec<u8>, WorkspaceError> {
        let mut file = self.open_file(p)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| self.map_io(p, "read", e))?;
        Ok(bytes)
    }

    /// Reads a UTF-8 text file, or `None` when it does not exist.
    pub fn read_text_if_exists(&self, p: &WorkspacePath) -> Result<Option<String>, WorkspaceError> {
        match self.read_bytes(p) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| WorkspaceError::NotUtf8 {
                    path: p.display.clone(),
                }),
            Err(WorkspaceError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads a UTF-8 text file of at most `limit` bytes, or `None` when it does not exist; a
    /// larger one is [`WorkspaceError::TooLarge`], found without reading past the limit (for
    /// files tandem reads on its own, which a command may have made huge).
    pub fn read_text_if_exists_capped(
        &self,
        p: &WorkspacePath,
        limit: u64,
    ) -> Result<Option<String>, WorkspaceError> {
        let file = match self.open_file(p) {
            Ok(file) => file,
            Err(WorkspaceError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.map_io(p, "read", e))?;
        if bytes.len() as u64 > limit {
            return Err(WorkspaceError::TooLarge {
                path: p.display.clone(),
                limit,
            });
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| WorkspaceError::NotUtf8 {
                path: p.display.clone(),
            })
    }

    /// Resolves `p` to its canonical path relative to its root, following
    /// symlinks only as far as they stay inside the root.
    pub fn canonical_relative(&self, p: &WorkspacePath) -> Result<PathBuf, WorkspaceError> {
        let dir = self.root_dir(p.root_index);
        let canon = dir
            .canonicalize(cap_path(&p.relative))
            .map_err(|e| self.map_io(p, "resolve", e))?;
        // cap-std spells the root itself as "."; callers join this onto the
        // root path, so the empty path is the useful spelling.
        if canon == Path::new(".") {
            Ok(PathBuf::new())
        } else {
            Ok(canon)
        }
    }

    /// The path `p` designates once symlinks inside the root are followed, relative to its
    /// root. For a path that does not exist yet, the deepest existing ancestor is resolved and
    /// the missing rest appended (missing components cannot be links). Protection checks use
    /// this, so a link cannot smuggle a write into `.git/` or a read out of `.env`.
    pub fn resolved_relative(&self, p: &WorkspacePath) -> Result<PathBuf, WorkspaceError> {
        match self.canonical_relative(p) {
            Ok(path) => return Ok(path),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        let parts: Vec<&std::ffi::OsStr> = p.relative.iter().collect();
        for keep in (0..parts.len()).rev() {
            let prefix: PathBuf = parts[..keep].iter().collect();
            let probe = WorkspacePath {
                root_index: p.root_index,
                relative: prefix,
                display: p.display.clone(),
            };
            match self.canonical_relative(&probe) {
                Ok(base) => {
                    let mut out = base;
                    for part in &parts[keep..] {
                        out.push(part);
                    }
                    return Ok(out);
                }
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(p.relative.clone())
    }

    /// Checks that `p` could be written by `write_atomic` without touching
    /// anything: it resolves inside the root, is not a directory, is not a
    /// dangling symlink and its missing parents can be created. Planning uses
    /// this so a doomed write is refused before the user is asked to approve it.
    pub fn check_writable(&self, p: &WorkspacePath) -> Result<(), WorkspaceError> {
        self.prepare_write(p).map(|_| ())
    }

    /// Lists a directory, sorted by name. Symlinks are reported as symlinks
    /// and not followed.
    pub fn list_dir(&self, p: &WorkspacePath) -> Result<Vec<DirEntryInfo>, WorkspaceError> {
        let dir = self.root_dir(p.root_index);
        let rel = cap_path(&p.relative);
        let meta = dir
            .metadata(rel)
            .map_err(|e| self.map_io(p, "inspect", e))?;
        if !meta.is_dir() {
            return Err(WorkspaceError::NotADirectory {
                path: p.display.clone(),
            });
        }
        let entries = dir.read_dir(rel).map_err(|e| self.map_io(p, "list", e))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| self.map_io(p, "list", e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let file_type = entry.file_type().map_err(|e| self.map_io(p, "list", e))?;
            let kind = if file_type.is_symlink() {
                EntryKind::Symlink
            } else if file_type.is_dir() {
                EntryKind::Dir
            } else if file_type.is_file() {
                EntryKind::File
            } else {
                EntryKind::Other
            };
            // An entry can vanish between readdir and stat; report it with
            // size 0 rather than failing the whole listing.
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            out.push(DirEntryInfo { name, kind, size });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// cap-std wants "." rather than an empty path for the root itself.
fn cap_path(relative: &Path) -> &Path {
    if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    }
}

/// Joins a path's components with '/', whatever the platform separator.
fn slashed(path: &Path) -> String {
    let mut out = String::new();
    for component in path.components() {
        match component {
            Component::RootDir => out.push('/'),
            other => {
                if !out.is_empty() && !out.ends_with('/') {
                    out.push('/');
                }
                out.push_str(&other.as_os_str().to_string_lossy());
            }
        }
    }
    out
}

/// cap-std reports sandbox escapes as a synthetic PermissionDenied error
/// without an OS error code; a real EACCES carries its errno.
fn is_escape(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied
        && (err.raw_os_error().is_none() || err.to_string().contains("outside of the filesystem"))
}

#[cfg(test)]
mod tests;
