//! Checkpoints: what recording a turn's changes costs and how long putting them back takes,
//! measured in process with the real store (a SQLite file on disk) and a real workspace tree.
//!
//! - Around a shell command in a 10,000-file workspace (100 folders of 100 files of about 1 KiB):
//!   `Recorder::before_command` and `after_command` with a command that changes 3 files in
//!   between, then a FULL store barrier (the call's start mark commits with it in a real turn),
//!   median of `RUNS` after the first command, once the tree is older than the 2 s racy window. The anchor is the shadow-git checkpoint other
//!   agents take around a command (Cline, Gemini CLI): `git add -A` and `git commit` into a
//!   separate git dir with the workspace as work tree, its index warm, the same 3 changes.
//! - The first command of a session (cold cache: every file read, hashed and stored), once.
//! - A file tool's write with its checkpoint (`before_edit`, the atomic write, `after_edit`)
//!   beside the write alone, median of `EDIT_RUNS` each, alternating, on a 4 KiB file.
//! - Rewinding a turn that changed 1,000 files (`rewind_files`), median of `REWIND_RUNS`.
//!
//! `TANDEM_BENCH_DETAIL=1` also prints each command's phases and one walk alone.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tandem::engine::checkpoint::{CheckpointCache, Recorder};
use tandem::store::{Durability, Store};
use tandem::workspace::Workspace;

use crate::common::*;

fn median(samples: Vec<Duration>) -> Duration {
    summarize(samples).median
}

const FOLDERS: usize = 100;
const FILES_PER_FOLDER: usize = 100;
const RUNS: usize = 15;
const EDIT_RUNS: usize = 60;
const REWIND_RUNS: usize = 5;
const REWIND_FILES: usize = 1_000;

pub struct CheckpointFigures {
    command_warm: Duration,
    shadow_git: Option<Duration>,
    command_cold: Duration,
    edit_with: Duration,
    edit_alone: Duration,
    rewind: Duration,
}

impl CheckpointFigures {
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = vec![Row::duration(
            "Checkpoint around a shell command, 10,000-file workspace (walk before and after, 3 files changed)",
            self.command_warm,
            self.shadow_git.unwrap_or_default(),
            if self.shadow_git.is_some() {
                "shadow-git `add -A` + `commit`"
            } else {
                "git not found"
            },
            Some((Duration::from_millis(50), "≤ 50 ms")),
        )];
        rows.push(Row::duration(
            "First command of a session, same workspace (every file read and stored)",
            self.command_cold,
            self.command_warm,
            "a later command",
            None,
        ));
        rows.push(Row::within_ratio(
            "A file tool's write with its checkpoint, 4 KiB file",
            self.edit_with,
            self.edit_alone,
            "the atomic write alone",
            (1.1, "≤ 1.1×"),
        ));
        rows.push(Row::duration(
            "Rewind of a turn that changed 1,000 files",
            self.rewind,
            self.command_warm,
            "one command's checkpoint",
            Some((Duration::from_secs(1), "≤ 1 s")),
        ));
        rows
    }

    pub fn note(&self) -> String {
        "Checkpoints: in process, the real store on disk (WAL, FULL barrier) and a tree on the same disk; \
         see examples/bench/checkpoint.rs for what each row times."
            .to_owned()
    }
}

fn make_tree(root: &Path) -> Result<()> {
    let body: String = "checkpoint bench line of text\n".repeat(34);
    for folder in 0..FOLDERS {
        let dir = root.join(format!("pkg{folder:03}"));
        std::fs::create_dir_all(&dir)?;
        for file in 0..FILES_PER_FOLDER {
            std::fs::write(
                dir.join(format!("f{file:03}.txt")),
                format!("{folder} {file}\n{body}"),
            )?;
        }
    }
    Ok(())
}

fn change_three(root: &Path, round: usize) -> Result<()> {
    for i in 0..3 {
        std::fs::write(
            root.join(format!("pkg{:03}/f{:03}.txt", (round * 7 + i) % FOLDERS, i)),
            format!("changed in round {round}\n"),
        )?;
    }
    Ok(())
}

fn git(args: &[&str], git_dir: &Path, work_tree: &Path) -> Result<()> {
    let status = Command::new("git")
        .arg(format!("--git-dir={}", git_dir.display()))
        .arg(format!("--work-tree={}", work_tree.display()))
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()?;
    if !status.status.success() {
        return Err(format!("git {args:?}: {}", String::from_utf8_lossy(&status.stderr)).into());
    }
    Ok(())
}

pub fn measure(runtime: &tokio::runtime::Runtime) -> Result<CheckpointFigures> {
    let scratch = tempfile::Builder::new()
        .prefix("tandem-bench-cp")
        .tempdir_in(std::env::temp_dir())?;
    let root = scratch.path().join("ws");
    std::fs::create_dir_all(&root)?;
    progress("checkpoint: writing a 10,000-file workspace");
    make_tree(&root)?;
    let root = root.canonicalize()?;
    let store = Store::open(&scratch.path().join("data/tandem.sqlite3"))?;
    let workspace = Workspace::open(vec![root.clone()])?;
    let recorder = Recorder {
        session_id: "s_bench".to_owned(),
        store: store.clone(),
        workspace: workspace.clone(),
        cache: std::sync::Arc::new(CheckpointCache::default()),
    };
    runtime.block_on(async {
        store.create_session(tandem::store::SessionRecord {
            id: "s_bench".to_owned(),
            cwd: root.display().to_string(),
            model: "m".to_owned(),
            mode: "fullAuto".to_owned(),
            title: None,
            created_at: 0,
            updated_at: 0,
            allow_network: false,
        });
        store.barrier(Durability::Full).await
    })?;

    // The first command: a cold cache reads everything.
    let command = |turn: &str, call: &str, round: usize| -> Result<Duration> {
        let (r, turn, call) = (recorder.clone(), turn.to_owned(), call.to_owned());
        let root = root.clone();
        let store = store.clone();
        runtime.block_on(async move {
            let start = Instant::now();
            let (r2, t2, c2) = (r.clone(), turn.clone(), call.clone());
            let baseline = tokio::task::spawn_blocking(move || r2.before_command(&t2, &c2)).await?;
            let walked = start.elapsed();
            store.barrier(Durability::Full).await?;
            let paused = start.elapsed();
            change_three(&root, round)?;
            let resumed = Instant::now();
            tokio::task::spawn_blocking(move || r.after_command(&turn, baseline)).await?;
            let after = resumed.elapsed();
            store.barrier(Durability::Normal).await?;
            if std::env::var_os("TANDEM_BENCH_DETAIL").is_some() {
                progress(&format!(
                    "checkpoint: before {walked:?}, its barrier {:?}, after {after:?}, its barrier {:?}",
                    paused - walked,
                    resumed.elapsed() - after
                ));
            }
            Ok::<_, BoxError>(paused + resumed.elapsed())
        })
    };
    progress("checkpoint: the first command (cold)");
    let command_cold = command("t_cold", "c_cold", 0)?;
    // Files changed within the last 2 s are read again at every walk (the racy rule), and the
    // whole tree was written a moment ago: a workspace a user works in is not. Later commands
    // are measured once the tree is older than that window (file times cannot be set back:
    // `ctime` is the kernel's).
    std::thread::sleep(Duration::from_secs(3));
    progress("checkpoint: later commands (warm)");
    let mut warm = Vec::with_capacity(RUNS);
    for run in 0..RUNS {
        warm.push(command(
            &format!("t_w{run}"),
            &format!("c_w{run}"),
            run + 1,
        )?);
    }
    let command_warm = median(warm);
    if std::env::var_os("TANDEM_BENCH_DETAIL").is_some() {
        let mut walks = Vec::new();
        for _ in 0..5 {
            let start = Instant::now();
            let w = workspace.walk_for_snapshot();
            walks.push(start.elapsed());
            assert!(w.entries.len() >= 10_000);
        }
        progress(&format!("checkpoint: one walk alone: {:?}", median(walks)));
    }

    // The shadow-git anchor, with a warm index.
    let shadow_git = if Command::new("git").arg("--version").output().is_ok() {
        progress("checkpoint: the shadow-git anchor");
        let git_dir = scratch.path().join("shadow.git");
        git(&["init", "-q"], &git_dir, &root)?;
        git(&["add", "-A"], &git_dir, &root)?;
        git(&["commit", "-q", "-m", "base"], &git_dir, &root)?;
        let mut samples = Vec::with_capacity(RUNS);
        for run in 0..RUNS {
            change_three(&root, 100 + run)?;
            let start = Instant::now();
            git(&["add", "-A"], &git_dir, &root)?;
            git(&["commit", "-q", "-m", "checkpoint"], &git_dir, &root)?;
            samples.push(start.elapsed());
        }
        Some(median(samples))
    } else {
        None
    };

    // A file tool's write with and without its checkpoint.
    progress("checkpoint: file tool writes");
    let path = workspace.resolve("edit.txt")?;
    let content = |i: usize| format!("{i}\n{}", "edited line\n".repeat(340));
    let landing = |_: &Path| Ok(());
    workspace.write_atomic(&path, content(0).as_bytes(), &landing)?;
    let (mut with, mut alone) = (Vec::new(), Vec::new());
    for i in 0..EDIT_RUNS {
        let start = Instant::now();
        workspace.write_atomic(&path, content(2 * i + 1).as_bytes(), &landing)?;
        alone.push(start.elapsed());
        let start = Instant::now();
        let ids = recorder.before_edit("t_edit", &path);
        workspace.write_atomic(&path, content(2 * i + 2).as_bytes(), &landing)?;
        recorder.after_edit("t_edit", &ids);
        with.push(start.elapsed());
    }
    runtime.block_on(store.barrier(Durability::Normal))?;

    // Rewinding a turn that changed 1,000 files.
    progress("checkpoint: rewinds of 1,000 files");
    let mut rewinds = Vec::with_capacity(REWIND_RUNS);
    for run in 0..REWIND_RUNS {
        let turn = format!("t_rw{run}");
        let (r, t) = (recorder.clone(), turn.clone());
        let baseline = runtime.block_on(async move {
            tokio::task::spawn_blocking(move || r.before_command(&t, "c_rw")).await
        })?;
        for n in 0..REWIND_FILES {
            std::fs::write(
                root.join(format!("pkg{:03}/f{:03}.txt", n / 10, n % 10)),
                format!("rewind round {run} file {n}\n"),
            )?;
        }
        let (r, t) = (recorder.clone(), turn.clone());
        runtime.block_on(async move {
            tokio::task::spawn_blocking(move || r.after_command(&t, baseline)).await
        })?;
        let records: Vec<_> = runtime
            .block_on(store.checkpoint_records("s_bench"))?
            .into_iter()
            .filter(|r| r.turn_id == turn)
            .collect();
        if records.len() < REWIND_FILES {
            return Err(format!(
                "the turn recorded {} files, not {REWIND_FILES}",
                records.len()
            )
            .into());
        }
        let start = Instant::now();
        let outcome = runtime.block_on(recorder.rewind_files(records, false))?;
        rewinds.push(start.elapsed());
        if !outcome.conflicts.is_empty() || outcome.restored.len() < REWIND_FILES {
            return Err(format!(
                "the rewind restored {} files with {} conflicts",
                outcome.restored.len(),
                outcome.conflicts.len()
            )
            .into());
        }
    }
    Ok(CheckpointFigures {
        command_warm,
        shadow_git,
        command_cold,
        edit_with: median(with),
        edit_alone: median(alone),
        rewind: median(rewinds),
    })
}
