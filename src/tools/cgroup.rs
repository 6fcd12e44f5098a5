//! A pids cgroup per shell command, where one can be made: it caps how many processes the command
//! may have at once (a fork bomb hits the cap, not the machine) and lets tandem end every process
//! the command started, whatever session or process group they moved to, in every layer
//! (bubblewrap, Landlock alone, or none).
//!
//! The child joins the cgroup itself, before `exec`, by writing `0` to a `cgroup.procs` that
//! tandem opened beforehand ([`CommandCgroup::join_fd`]): nothing it starts can run outside it.
//! cgroup v2 is used where the pids controller is enabled for the children of tandem's own cgroup,
//! else the v1 pids hierarchy where it is mounted and writable (root, or a delegated tree). Where
//! neither works (a user without delegation), commands run without a cap and
//! [`CommandCgroup::create`] says why; the sandbox's PID namespace (bubblewrap) or subreaper
//! (Landlock alone) still ends their processes.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Keeps cgroup names unique among the commands of this process.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// One command's cgroup; [`CommandCgroup::end`] kills what is left in it and removes it.
#[derive(Debug)]
pub struct CommandCgroup {
    dir: PathBuf,
    /// `cgroup.procs`, open for writing, for the child to join with.
    procs: File,
}

impl CommandCgroup {
    /// Make a cgroup that allows at most `max_processes` processes (threads count too, as the
    /// pids controller counts tasks), or say why none can be made here.
    pub fn create(max_processes: u64) -> Result<CommandCgroup, String> {
        let self_cgroups = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let name = format!(
            "tandem-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut why = Vec::new();
        for parent in candidate_parents(&self_cgroups) {
            match make(&parent.join(&name), max_processes) {
                Ok(cgroup) => return Ok(cgroup),
                Err(e) => why.push(format!("{}: {e}", parent.display())),
            }
        }
        Err(if why.is_empty() {
            "no pids cgroup hierarchy is mounted".to_owned()
        } else {
            why.join("; ")
        })
    }

    /// The descriptor the child writes `0` to (before `exec`) to join the cgroup.
    pub fn join_fd(&self) -> BorrowedFd<'_> {
        self.procs.as_fd()
    }

    /// Kill every process still in the cgroup and remove it. Called when the command ended or
    /// was stopped: whatever it started in the background ends with it.
    pub fn end(self) {
        for _ in 0..64 {
            let pids = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = pids.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            // A killed process leaves the cgroup once it is reaped by its parent (the sandbox's
            // init or helper, or tandem's own reaper); give that a moment between rounds.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::warn!(cgroup = %self.dir.display(), error = %e, "cannot remove a command's cgroup");
        }
    }
}

/// Where a command cgroup may go: beside tandem in the v2 tree (as a child of its cgroup), then
/// in the v1 pids hierarchy.
fn candidate_parents(self_cgroups: &str) -> Vec<PathBuf> {
    let mut parents = Vec::new();
    for line in self_cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if controllers.is_empty() {
            for base in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                let base = Path::new(base);
                if base.join("cgroup.controllers").exists() {
                    parents.push(base.join(relative));
                }
            }
        } else if controllers.split(',').any(|c| c == "pids") {
            parents.push(Path::new("/sys/fs/cgroup/pids").join(relative));
        }
    }
    parents
}

fn make(dir: &Path, max_processes: u64) -> Result<CommandCgroup, String> {
    std::fs::create_dir(dir).map_err(|e| e.to_string())?;
    let setup = (|| -> Result<File, String> {
        let mut limit = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("pids.max"))
            .map_err(|e| format!("no pids controller here ({e})"))?;
        limit
            .write_all(format!("{max_processes}\n").as_bytes())
            .map_err(|e| format!("cannot set pids.max ({e})"))?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map_err(|e| format!("cannot open cgroup.procs ({e})"))
    })();
    match setup {
        Ok(procs) => Ok(CommandCgroup {
            dir: dir.to_path_buf(),
            procs,
        }),
        Err(e) => {
            let _ = std::fs::remove_dir(dir);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_come_from_the_v2_line_and_the_v1_pids_line() {
        let parents = candidate_parents("8:pids:/user.slice\n4:memory:/x\n0::/user.slice/app\n");
        assert!(parents.contains(&PathBuf::from("/sys/fs/cgroup/pids/user.slice")));
        assert!(!parents
            .iter()
            .any(|p| p.starts_with("/sys/fs/cgroup/memory")));
    }
}
