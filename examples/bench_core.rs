//! Core benchmark of `tandem serve`: cold start, idle memory, streaming delta latency, resume of a large session and the cost of persistence, each printed beside an anchor measured in the same run.
//!
//! Run it with `cargo run --release --example bench_core [-- --bin PATH]`. It exits non-zero only
//! when something fails; a missed target is reported in the table, not as an error.
//!
//! Every figure has an anchor so that a slow or loaded machine shows up as a slow anchor rather
//! than as a tandem regression:
//! - cold start and idle memory are compared with `/bin/cat`, the floor of "spawn a process and
//!   echo one line through its pipes";
//! - delta latency is compared with the same mock stream consumed in-process by the minimal
//!   reqwest + eventsource-stream + serde_json pipeline that any Rust agent needs;
//! - resume of a 10,000-message session is compared with a raw rusqlite read of the same rows,
//!   and with the initialize-only start of the same binary on the same data dir, so the table
//!   shows what `session/load` itself adds;
//! - a full turn with the store is compared with the same in-process server without a store.
//!
//! The measurements live in `examples/bench/core.rs` and are shared with the full suite
//! (`cargo run --release --example bench`), which adds the comparisons with Codex and ripgrep.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark: its table and progress lines on the terminal are the point"
)]

// The shared modules also serve the full suite; this binary uses only part of them.
#[allow(dead_code)]
#[path = "bench/common.rs"]
mod common;
#[allow(dead_code)]
#[path = "bench/core.rs"]
mod core;
#[allow(dead_code)]
#[path = "bench/mock.rs"]
mod mock;
#[allow(dead_code)]
#[path = "bench/rpc.rs"]
mod rpc;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use common::{machine, print_table, resolve_binary, Result};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench_core: error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let bin = resolve_binary(parse_bin_arg()?)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let figures = core::measure(&bin, &runtime)?;
    print_table("tandem core benchmark", &figures.rows());
    figures.print_notes();
    print_footer(&bin);
    Ok(())
}

fn print_footer(bin: &Path) {
    println!();
    println!("Machine: {}. Binary: `{}`.", machine(), bin.display());
    println!();
    println!("Reproduce: `cargo run --release --example bench_core`");
}

/// `--bin PATH` (or `--bin=PATH`), the only option.
fn parse_bin_arg() -> Result<Option<PathBuf>> {
    let mut args = std::env::args_os().skip(1);
    let mut bin = None;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        if text == "--bin" {
            let value = args.next().ok_or("--bin needs a path")?;
            bin = Some(PathBuf::from(value));
        } else if let Some(value) = text.strip_prefix("--bin=") {
            bin = Some(PathBuf::from(value));
        } else if text == "-h" || text == "--help" {
            println!("usage: cargo run --release --example bench_core [-- --bin PATH]\n\nPATH defaults to $TANDEM_BIN, then target/release/tandem (built first when missing or older than the sources).");
            std::process::exit(0);
        } else {
            return Err(format!("unknown argument `{text}`; the only option is --bin PATH").into());
        }
    }
    Ok(bin)
}
