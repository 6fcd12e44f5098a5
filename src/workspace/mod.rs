//! Workspace roots, kernel-enforced path confinement and atomic writes.
//!
//! Every open, create and rename goes through a `cap_std::fs::Dir` handle for
//! the root the path belongs to. On Linux cap-std resolves paths with
//! `openat2(RESOLVE_BENEATH)`, so `..` escapes and symlinks that leave the
//! root are refused by the kernel rather than by string checks here. The only
//! lexical step is mapping an absolute path onto the root it starts with.

pub mod diff;
pub mod protected;

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
    /// Opens the given roots. Each must be an absolute path to an existing
    /// directory; it is canonicalized so absolute paths can be mapped onto it.
    pub fn open(roots: Vec<PathBuf>) -> Result<Workspace, WorkspaceError> {
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
            }),
        })
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

    /// Writes a file atomically: missing parent directories are created
    /// (inside the root), the bytes go to a temp file in the same directory,
    /// which is fsynced and renamed over the target. An existing file keeps
    /// its permissions; a symlink inside the root is written through.
    ///
    /// `landing_check` sees where the file really lands, as a path relative to
    /// the root, and may refuse it with a reason. It is asked about the parent
    /// directory *as opened* (the kernel's path of that open directory, after
    /// every link was followed), and the temp file and the rename then go
    /// through that same open directory by name alone: a folder swapped for a
    /// link after the call was planned (`g -> .git`) is seen for what it is,
    /// and nothing can be swapped between the check and the write.
    pub fn write_atomic(
        &self,
        p: &WorkspacePath,
        bytes: &[u8],
        landing_check: &dyn Fn(&Path) -> Result<(), String>,
    ) -> Result<(), WorkspaceError> {
        let dir = self.root_dir(p.root_index);
        let plan = self.prepare_write(p)?;
        for missing in &plan.missing_dirs {
            match dir.create_dir(missing) {
                Ok(()) => {}
                // Another writer may have created it in the meantime.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir(missing) => {}
                Err(e) => return Err(self.map_io(p, "create the parent directory of", e)),
            }
        }

        let parent_dir = if plan.parent.as_os_str().is_empty() {
            dir.try_clone()
        } else {
            dir.open_dir(cap_path(&plan.parent))
        }
        .map_err(|e| self.map_io(p, "open the directory of", e))?;
        let landing = self.landing_of(p, &parent_dir)?.join(&plan.file_name);
        if let Err(reason) = landing_check(&landing) {
            return Err(WorkspaceError::ProtectedLanding {
                path: p.display.clone(),
                landing: self.display_path(p.root_index, &landing),
                reason,
            });
        }

        let temp = temp_name(&plan.file_name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        let mut temp_file = parent_dir
            .open_with(&temp, &options)
            .map_err(|e| self.map_io(p, "create a temp file for", e))?;

        let written = (|| -> io::Result<()> {
            temp_file.write_all(bytes)?;
            if let Some(perms) = plan.permissions {
                temp_file.set_permissions(perms)?;
            }
            temp_file.sync_all()?;
            drop(temp_file);
            parent_dir.rename(&temp, &parent_dir, &plan.file_name)
        })();
        if let Err(e) = written {
            // Best effort: a leftover temp file is clutter, but the original
            // error is what the caller needs to see.
            let _ = parent_dir.remove_file(&temp);
            return Err(self.map_io(p, "write", e));
        }

        // The rename is durable only once the directory entry is synced.
        // Some filesystems refuse fsync on directories; the data itself is
        // already safe, so that failure is not worth reporting.
        let _ = parent_dir.into_std_file().sync_all();
        Ok(())
    }

    /// Where an open directory of root `p.root_index` really is, relative to
    /// that root: the kernel's own path of the open directory
    /// (`/proc/self/fd/N`), so a name checked earlier cannot stand in for it.
    /// Refused when it cannot be told (no `/proc`, a deleted directory) or it
    /// is not beneath the root: the write must not go ahead blind.
    fn landing_of(&self, p: &WorkspacePath, opened: &Dir) -> Result<PathBuf, WorkspaceError> {
        use std::os::fd::{AsFd, AsRawFd};
        let link = format!("/proc/self/fd/{}", opened.as_fd().as_raw_fd());
        let real = std::fs::read_link(&link).map_err(|e| WorkspaceError::Io {
            path: p.display.clone(),
            op: "tell where the directory of",
            source: e,
        })?;
        let root = &self.inner.roots[p.root_index];
        real.strip_prefix(root).map(Path::to_path_buf).map_err(|_| {
            WorkspaceError::OutsideWorkspace {
                path: p.display.clone(),
                roots: root.display().to_string(),
            }
        })
    }

    /// Works out where a write to `p` lands, without changing anything.
    fn prepare_write(&self, p: &WorkspacePath) -> Result<WritePlan, WorkspaceError> {
        let dir = self.root_dir(p.root_index);
        let mut target = p.relative.clone();
        let mut permissions = None;
        match dir.symlink_metadata(cap_path(&target)) {
            Ok(meta) if meta.file_type().is_symlink() => {
                // Renaming over a symlink would replace the link with a plain
                // file; writing to its (confined) target keeps the link. An
                // escaping link fails here with the sandbox error.
                target = match dir.canonicalize(&target) {
                    Ok(real) => real,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        return Err(WorkspaceError::DanglingSymlink {
                            path: p.display.clone(),
                        })
                    }
                    Err(e) => return Err(self.map_io(p, "resolve", e)),
                };
                let meta = dir
                    .metadata(&target)
                    .map_err(|e| self.map_io(p, "inspect", e))?;
                if !meta.is_file() {
                    return Err(WorkspaceError::NotAFile {
                        path: p.display.clone(),
                    });
                }
                permissions = Some(meta.permissions());
            }
            Ok(meta) if meta.is_file() => permissions = Some(meta.permissions()),
            Ok(_) => {
                return Err(WorkspaceError::NotAFile {
                    path: p.display.clone(),
                })
            }
            // A parent that is a file (ENOTDIR) is reported precisely by
            // the parent check below.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(self.map_io(p, "inspect", e)),
        }

        let file_name = match target.file_name() {
            Some(name) => name.to_os_string(),
            None => {
                return Err(WorkspaceError::NotAFile {
                    path: p.display.clone(),
                })
            }
        };
        let parent = target.parent().map(Path::to_path_buf).unwrap_or_default();
        let missing_dirs = self.missing_parents(p, &parent)?;
        Ok(WritePlan {
            parent,
            file_name,
            permissions,
            missing_dirs,
        })
    }

    /// The directories of `parent` that do not exist yet, outermost first.
    /// Each existing prefix is checked through the root's handle, so a
    /// component cannot lead outside.
    fn missing_parents(
        &self,
        p: &WorkspacePath,
        parent: &Path,
    ) -> Result<Vec<PathBuf>, WorkspaceError> {
        let dir = self.root_dir(p.root_index);
        let components: Vec<Component<'_>> = parent
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        let mut prefix = PathBuf::new();
        let mut first_missing = None;
        for (i, component) in components.iter().enumerate() {
            prefix.push(component.as_os_str());
            match dir.metadata(&prefix) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    return Err(WorkspaceError::NotADirectory {
                        path: self.display_path(p.root_index, &prefix),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    first_missing = Some(i);
                    break;
                }
                Err(e) => return Err(self.map_io(p, "inspect", e)),
            }
        }
        let Some(first_missing) = first_missing else {
            return Ok(Vec::new());
        };
        // `..` after a directory that does not exist yet cannot be resolved
        // by the kernel without creating something first; refusing it up
        // front means a refused write leaves no trace.
        if components[first_missing..]
            .iter()
            .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(WorkspaceError::UnresolvableParent {
                path: p.display.clone(),
            });
        }
        let mut prefix: PathBuf = components[..first_missing]
            .iter()
            .map(|c| c.as_os_str())
            .collect();
        let mut missing = Vec::new();
        for component in &components[first_missing..] {
            prefix.push(component.as_os_str());
            missing.push(prefix.clone());
        }
        Ok(missing)
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

/// A hidden, unique temp file name next to the target.
fn temp_name(file_name: &OsStr) -> String {
    let name = file_name.to_string_lossy();
    let mut stem_len = name.len().min(TEMP_NAME_STEM_MAX);
    while !name.is_char_boundary(stem_len) {
        stem_len -= 1;
    }
    let counter = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        ".{}.tandem-{}-{}.tmp",
        &name[..stem_len],
        std::process::id(),
        counter
    )
}

/// cap-std reports sandbox escapes as a synthetic PermissionDenied error
/// without an OS error code; a real EACCES carries its errno.
fn is_escape(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied
        && (err.raw_os_error().is_none() || err.to_string().contains("outside of the filesystem"))
}

#[cfg(test)]
mod tests;
