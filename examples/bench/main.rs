//! tandem's benchmark suite: every figure beside an anchor measured in the same run (Codex
//! app-server, ripgrep, an in-process floor, a raw rusqlite read), printed as one table of
//! ratios with the target each must meet.
//!
//! `cargo run --release --example bench -- [all|codex|history|grep|fanout|load|floods|mcp|checkpoint|hooks|core|persistence] [--bin PATH]`
//! installs the anchors into `<target>/bench-tools` when missing. `examples/bench/README.md`
//! describes each method. A missed target is a table entry, not an error; the exit code is
//! non-zero only when a measurement fails.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark: its table and progress lines on the terminal are the point"
)]

mod anchors;
mod checkpoint;
mod codex;
mod common;
mod core;
mod fanout;
mod floods;
mod grep;
mod history;
mod hooks;
mod load;
mod mcp;
mod mock;
mod rpc;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use common::{machine, print_table, progress, resolve_binary, Result, Row};

const USAGE: &str = "usage: cargo run --release --example bench -- [all|codex|history|grep|fanout|load|floods|mcp|checkpoint|hooks|core|persistence]... [--bin PATH]

  all     everything below (the default)
  codex   cold start, memory and a full turn beside Codex app-server (npm @openai/codex)
  history beside Codex app-server: turns in sessions of 10 to 5,000 prior messages (time to the
          model request, CPU, memory), the prompt-cache prefix over 20 tool turns, memory per
          session, a 500-turn session and its resume
  grep    the grep tool beside ripgrep 14+ on a generated corpus of a few hundred MB
  fanout  16 read_file calls in one assistant message beside 16 sequential ones
  load    50 concurrent sessions streaming paced deltas
  floods  peak memory under hostile floods (200 MB of shell output to a stalled client, a 300 MB
          answer, 100 MB of tool-call arguments, read_file of a 1.5 GB line, 3,000 steers)
  mcp     an MCP tool call in a turn beside the Python SDK client's call, and session/new with
          three MCP servers beside none (needs tests/mcp/setup)
  checkpoint
          checkpoints around a shell command in a 10,000-file workspace beside a shadow-git
          checkpoint, a file tool's write with its checkpoint, a rewind of 1,000 files
  hooks   what a PreToolUse hook that exits at once adds to a tool call
  core    event latency and resume (also cold start, idle memory and persistence beside their floors)
  persistence
          only the persistence comparison of core (a 200-delta turn with and without the store)

PATH defaults to $TANDEM_BIN, then <target>/release/tandem (built first when missing or older than the sources).
Anchors go to <target>/bench-tools (or $TANDEM_BENCH_TOOLS); CODEX_BIN and RG_BIN override them.";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Codex,
    History,
    Grep,
    Fanout,
    Load,
    Floods,
    Mcp,
    Checkpoint,
    Hooks,
    Core,
    Persistence,
}

const ALL: [Part; 10] = [
    Part::Codex,
    Part::History,
    Part::Grep,
    Part::Fanout,
    Part::Load,
    Part::Floods,
    Part::Mcp,
    Part::Checkpoint,
    Part::Hooks,
    Part::Core,
];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench: error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args() -> Result<(Vec<Part>, Option<PathBuf>)> {
    let mut args = std::env::args_os().skip(1);
    let mut parts = Vec::new();
    let mut bin = None;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        match text.as_str() {
            "all" => parts.extend(ALL),
            "codex" => parts.push(Part::Codex),
            "history" => parts.push(Part::History),
            "grep" => parts.push(Part::Grep),
            "fanout" => parts.push(Part::Fanout),
            "load" => parts.push(Part::Load),
            "floods" => parts.push(Part::Floods),
            "mcp" => parts.push(Part::Mcp),
            "checkpoint" => parts.push(Part::Checkpoint),
            "hooks" => parts.push(Part::Hooks),
            "core" => parts.push(Part::Core),
            "persistence" => parts.push(Part::Persistence),
            "--bin" => bin = Some(PathBuf::from(args.next().ok_or("--bin needs a path")?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => {
                if let Some(value) = other.strip_prefix("--bin=") {
                    bin = Some(PathBuf::from(value));
                } else {
                    return Err(format!("unknown argument `{other}`\n\n{USAGE}").into());
                }
            }
        }
    }
    if parts.is_empty() {
        parts.extend(ALL);
    }
    parts.dedup();
    Ok((parts, bin))
}

fn run() -> Result<()> {
    let (parts, bin) = parse_args()?;
    let bin = resolve_binary(bin)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut core_figures = None;
    for part in parts {
        match part {
            Part::Codex => match anchors::codex() {
                Ok(codex) => {
                    let figures = codex::measure(&bin, &codex, &runtime)?;
                    rows.extend(figures.rows());
                    notes.push(format!(
                        "Codex: `{}` (`{}`), `codex app-server` with a scratch `CODEX_HOME` whose config points the model \
                         provider at a loopback Responses API mock, approval policy on-request, plugins, apps, analytics, \
                         feedback, OpenTelemetry and update checks off. tandem: `tandem serve` with an OpenAI-compatible \
                         provider on a loopback chat-completions mock. Memory is VmRSS summed over the process and its \
                         descendants; the peak is sampled every 2 ms during the turn (at least the server's own VmHWM).",
                        figures.version,
                        codex.display()
                    ));
                }
                Err(error) => {
                    progress(&format!("codex: skipped: {error}"));
                    for measure in [
                        "Cold start vs Codex",
                        "Idle memory vs Codex",
                        "Peak memory vs Codex",
                        "Full turn vs Codex",
                    ] {
                        rows.push(Row::failed(measure, &error.to_string(), "see README"));
                    }
                }
            },
            Part::History => match anchors::codex() {
                Ok(codex) => {
                    let figures = history::measure(&bin, &codex, &runtime)?;
                    rows.extend(figures.rows());
                    notes.push(figures.note());
                }
                Err(error) => {
                    progress(&format!("history: skipped: {error}"));
                    rows.extend(history::not_run_rows(&error.to_string()));
                }
            },
            Part::Grep => match anchors::rg() {
                Ok(rg) => {
                    let figures = grep::measure(&rg)?;
                    rows.extend(figures.rows());
                    notes.push(figures.note(&rg));
                }
                Err(error) => {
                    progress(&format!("grep: skipped: {error}"));
                    rows.push(Row::failed(
                        "grep tool vs ripgrep",
                        &error.to_string(),
                        "≤ 1.1×",
                    ));
                }
            },
            Part::Hooks => {
                let figures = hooks::measure(&bin, &runtime)?;
                rows.extend(figures.rows());
                notes.push(figures.note());
            }
            Part::Fanout => {
                let figures = fanout::measure(&bin, &runtime)?;
                rows.extend(figures.rows());
                notes.push(figures.note());
            }
            Part::Load => {
                let figures = load::measure(&bin, &runtime)?;
                rows.extend(figures.rows());
                notes.push(figures.note());
            }
            Part::Floods => {
                let figures = floods::measure(&bin, &runtime)?;
                rows.extend(figures.rows());
                notes.push(figures.note());
            }
            Part::Mcp => match mcp::locate() {
                Ok(_) => {
                    let figures = mcp::measure(&bin, &runtime)?;
                    rows.extend(figures.rows());
                    notes.push(figures.note());
                }
                Err(error) => {
                    progress(&format!("mcp: skipped: {error}"));
                    for measure in [
                        "MCP tool call overhead",
                        "session/new with three MCP servers",
                    ] {
                        rows.push(Row::failed(measure, &error.to_string(), "see README"));
                    }
                }
            },
            Part::Checkpoint => {
                let figures = checkpoint::measure(&runtime)?;
                rows.extend(figures.rows());
                notes.push(figures.note());
            }
            Part::Core => {
                let figures = core::measure(&bin, &runtime)?;
                rows.extend(figures.issue_rows());
                core_figures = Some(figures);
            }
            Part::Persistence => {
                let figures = core::measure_persistence(&runtime)?;
                rows.push(figures.row());
                notes.push(figures.note());
            }
        }
    }
    print_table("tandem benchmark suite", &rows);
    for note in &notes {
        println!();
        println!("{note}");
    }
    if let Some(figures) = core_figures {
        print_table(
            "Core figures (also `cargo run --release --example bench_core`)",
            &figures.rows(),
        );
        figures.print_notes();
    }
    print_footer(&bin);
    Ok(())
}

fn print_footer(bin: &Path) {
    println!();
    println!("Machine: {}. Binary: `{}`.", machine(), bin.display());
    println!();
    println!("Reproduce: `cargo run --release --example bench -- all`");
}
