//! The process tree below this process: find every live descendant through `/proc`, and kill
//! and reap them all. Used by supervisors that are child subreapers (the sandbox's Landlock
//! helper, the MCP guard), so that what a command or server started (with `setsid`, `nohup` or
//! `&`) ends with it.
//!
//! Invariant: [`kill_descendants`] returns only when no live descendant is left (or after 64
//! rounds against a fork bomb), and never touches a process outside this process's subtree.

/// Kill every descendant of this process and reap them, until none is left (a process that
/// forks while the tree is being killed is found in the next round, as an orphan that became
/// this subreaper's child).
pub fn kill_descendants() {
    use rustix::process::{kill_process, wait, Pid, Signal, WaitOptions};
    let me = rustix::process::getpid().as_raw_nonzero().get();
    for _ in 0..64 {
        let descendants = descendants_of(me);
        if descendants.is_empty() {
            break;
        }
        for pid in &descendants {
            if let Some(pid) = Pid::from_raw(*pid) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        // Reap what died: one blocking wait (something was just killed), then the rest.
        let mut options = WaitOptions::empty();
        while let Ok(Some(_)) = wait(options) {
            options = WaitOptions::NOHANG;
        }
    }
    // Orphans that had already exited are zombies of this subreaper: reap them too.
    while let Ok(Some(_)) = wait(WaitOptions::NOHANG) {}
}

/// The live descendants of `root` (zombies excluded), from `/proc/*/stat`.
pub fn descendants_of(root: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses, so split after
        // the last `)`.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = after.split_whitespace();
        let (Some(state), Some(ppid)) = (fields.next(), fields.next()) else {
            continue;
        };
        if state == "Z" {
            continue;
        }
        if let Ok(ppid) = ppid.parse::<i32>() {
            parents.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        index += 1;
    }
    found.remove(0);
    found
}
