//! Atomic writes into a workspace: the parent directories created inside the root, a temp
//! file beside the target, fsync, rename, with a check of where the write really lands.
//!
//! Invariants: every step goes through the root's `cap_std` directory handle (the kernel keeps
//! it beneath the root); the landing check sees the parent directory as opened, and the temp
//! file and the rename go through that same open directory, so nothing can be swapped between
//! the check and the write.

use super::*;

impl Workspace {
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
    pub(super) fn prepare_write(&self, p: &WorkspacePath) -> Result<WritePlan, WorkspaceError> {
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
}

/// A hidden, unique temp file name next to the target.
pub(super) fn temp_name(file_name: &OsStr) -> String {
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
