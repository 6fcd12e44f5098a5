//! tandem's `grep` tool beside ripgrep on the same corpus and pattern.
//!
//! The corpus is a few hundred MB of Rust-like source generated deterministically (a fixed-seed
//! xorshift generator) into `<target>/bench-tools/grep-corpus-v1`, in nested directories, with a
//! `.gitignore` that hides a `target/` tree and `*.log` files, so both searchers must honour it.
//! It is built once and reused.
//!
//! tandem runs in-process through the library (`tandem::tools::fs::grep`, exactly what the tool
//! call executes, minus the JSON around it); ripgrep runs as `rg -n --no-require-git PATTERN`
//! (tandem honours `.gitignore` outside a git checkout too) with its output read through a pipe.
//! Both print `path:line:text` per matching line; ripgrep prints every line while tandem keeps
//! the first 500 in path order and counts the rest, and the benchmark checks that both counted
//! the same number of matching lines.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tandem::workspace::Workspace;

use crate::anchors::{rg_version, tools_dir};
use crate::common::*;

/// Bumped whenever the generator changes, so a stale corpus is never reused.
const CORPUS_NAME: &str = "grep-corpus-v1";
const DIRS_TOP: usize = 30;
const DIRS_MID: usize = 10;
const FILES_PER_DIR: usize = 10;
const FILE_BYTES: usize = 100 * 1024;
/// Ignored by the `.gitignore`: searched by neither.
const IGNORED_FILES: usize = 200;
const PATTERN: &str = r"fn parse_[a-z]+_v7\(";
const WARMUPS: usize = 1;
/// Many runs, because on a shared 2-core machine single runs swing by ±30%.
const RUNS: usize = 11;

pub struct GrepFigures {
    tandem: Duration,
    rg: Duration,
    matches: usize,
    /// CPU time (user + system) per run, from `/proc/self/stat`: this process for tandem, its
    /// waited-for children for ripgrep. Less sensitive than wall time to other load.
    tandem_cpu: Duration,
    rg_cpu: Duration,
    corpus_bytes: u64,
    files: usize,
}

impl GrepFigures {
    pub fn rows(&self) -> Vec<Row> {
        vec![
            self.wall_row(),
            Row::within_ratio(
                "grep tool: CPU time per search (user + system, mean)",
                self.tandem_cpu,
                self.rg_cpu,
                "ripgrep",
                (1.1, "≤ 1.1× (diagnostic)"),
            ),
        ]
    }

    fn wall_row(&self) -> Row {
        Row::within_ratio(
            &format!(
                "grep tool, median of {RUNS}: `{PATTERN}` over {:.0} MB in {} files ({} matching lines)",
                self.corpus_bytes as f64 / 1e6,
                self.files,
                self.matches
            ),
            self.tandem,
            self.rg,
            "ripgrep",
            (1.1, "≤ 1.1×"),
        )
    }

    pub fn note(&self, rg: &Path) -> String {
        format!(
            "grep: ripgrep {} (`{}`) as `rg -n --no-require-git '{PATTERN}'` in the corpus root, output read through a pipe; \
             tandem's `tandem::tools::fs::grep` in-process on the same root. Page cache warm ({WARMUPS} warm-up each), \
             {RUNS} runs each, alternating. Both counted {} matching lines.",
            rg_version(rg),
            rg.display(),
            self.matches
        )
    }
}

pub fn measure(rg: &Path) -> Result<GrepFigures> {
    let (root, corpus_bytes, files) = corpus()?;
    let ws = Workspace::open(vec![root.clone()])?;
    progress(&format!(
        "grep: {WARMUPS} warm-up + {RUNS} runs each of `{PATTERN}`, alternating tandem and ripgrep"
    ));
    let mut tandem_times = Vec::new();
    let mut rg_times = Vec::new();
    let mut counts = None;
    let mut tandem_cpu = Duration::ZERO;
    let mut rg_cpu = Duration::ZERO;
    for run in 0..WARMUPS + RUNS {
        let cpu_before = cpu_times()?;
        let start = Instant::now();
        let outcome = tandem::tools::fs::grep(&ws, PATTERN, None, None);
        let tandem_time = start.elapsed();
        let cpu_middle = cpu_times()?;
        if outcome.is_error {
            return Err(format!("tandem's grep failed: {}", outcome.output).into());
        }
        let tandem_count = tandem_total(&outcome.output)?;

        let start = Instant::now();
        let rg_count = run_rg(rg, &root)?;
        let rg_time = start.elapsed();
        let cpu_after = cpu_times()?;

        if tandem_count != rg_count {
            return Err(format!(
                "tandem counted {tandem_count} matching lines and ripgrep {rg_count}; the searches differ"
            )
            .into());
        }
        counts = Some(tandem_count);
        if run >= WARMUPS {
            tandem_times.push(tandem_time);
            rg_times.push(rg_time);
            tandem_cpu += cpu_middle.0 - cpu_before.0;
            rg_cpu += cpu_after.1 - cpu_middle.1;
        }
    }
    Ok(GrepFigures {
        tandem: summarize(tandem_times).median,
        rg: summarize(rg_times).median,
        matches: counts.unwrap_or(0),
        tandem_cpu: tandem_cpu / RUNS as u32,
        rg_cpu: rg_cpu / RUNS as u32,
        corpus_bytes,
        files,
    })
}

/// (this process, its waited-for children) CPU time so far, from `/proc/self/stat`.
fn cpu_times() -> Result<(Duration, Duration)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name: state is the 1st, utime the 12th, then stime, cutime,
    // cstime.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(11)
                .take(4)
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if fields.len() != 4 {
        return Err("cannot read CPU times from /proc/self/stat".into());
    }
    // USER_HZ is 100 on every Linux ABI Rust targets.
    let ticks = |t: u64| Duration::from_millis(t * 10);
    Ok((ticks(fields[0] + fields[1]), ticks(fields[2] + fields[3])))
}

/// The number of matching lines tandem reports: the lines shown, or the total in its
/// "showing the first N of TOTAL" note.
fn tandem_total(output: &str) -> Result<usize> {
    if let Some(at) = output.find("(showing the first ") {
        let rest = &output[at..];
        let total = rest
            .split_once(" of ")
            .and_then(|(_, tail)| tail.split(')').next())
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| format!("cannot read the total from tandem's note: {rest:.120}"))?;
        return Ok(total);
    }
    if output.starts_with("No matches") {
        return Ok(0);
    }
    Ok(output.lines().take_while(|l| !l.is_empty()).count())
}

/// Runs ripgrep in `root` and counts its output lines.
fn run_rg(rg: &Path, root: &Path) -> Result<usize> {
    let mut child = Command::new(rg)
        .args([
            "-n",
            "--no-require-git",
            "--color",
            "never",
            "--no-heading",
            PATTERN,
        ])
        .current_dir(root)
        .env_remove("RIPGREP_CONFIG_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("rg stdout was not piped")?;
    let mut reader = BufReader::with_capacity(256 * 1024, stdout);
    let mut lines = 0;
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line)? > 0 {
        lines += 1;
        line.clear();
    }
    let status = child.wait()?;
    // ripgrep exits 1 when nothing matched, which is a valid result here.
    if !status.success() && status.code() != Some(1) {
        return Err(format!("rg failed ({status})").into());
    }
    Ok(lines)
}

// ---------------------------------------------------------------------------------------------
// The corpus

/// Builds the corpus once; returns its root, the bytes and the files both searchers read.
fn corpus() -> Result<(PathBuf, u64, usize)> {
    let root = tools_dir().join(CORPUS_NAME);
    let stamp = root.join(".complete");
    let files = DIRS_TOP * DIRS_MID * FILES_PER_DIR;
    let searched_bytes = (files * FILE_BYTES) as u64;
    if stamp.is_file() {
        return Ok((root, searched_bytes, files));
    }
    progress(&format!(
        "grep: generating a {:.0} MB corpus in {} (once)",
        (searched_bytes + (IGNORED_FILES * FILE_BYTES) as u64) as f64 / 1e6,
        root.display()
    ));
    if root.exists() {
        std::fs::remove_dir_all(&root)?;
    }
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join(".gitignore"), "/target/\n*.log\n")?;
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for top in 0..DIRS_TOP {
        for mid in 0..DIRS_MID {
            let dir = root.join(format!("crates/c{top:02}/src/m{mid}"));
            std::fs::create_dir_all(&dir)?;
            for file in 0..FILES_PER_DIR {
                std::fs::write(dir.join(format!("f{file}.rs")), source_file(&mut rng))?;
            }
        }
    }
    let ignored = root.join("target/debug/build");
    std::fs::create_dir_all(&ignored)?;
    for file in 0..IGNORED_FILES {
        let name = if file % 2 == 0 {
            format!("gen{file}.rs")
        } else {
            format!("gen{file}.log")
        };
        let dir = if file % 2 == 0 { &ignored } else { &root };
        std::fs::write(dir.join(name), source_file(&mut rng))?;
    }
    std::fs::write(&stamp, "")?;
    Ok((root, searched_bytes, files))
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[(self.next() % words.len() as u64) as usize]
    }
}

const VERBS: &[&str] = &[
    "parse", "render", "load", "store", "handle", "encode", "decode", "merge",
];
const NOUNS: &[&str] = &[
    "request", "header", "frame", "token", "config", "session", "buffer", "record", "event",
    "payload",
];
const TYPES: &[&str] = &[
    "Request", "Header", "Frame", "Token", "Config", "Session", "Buffer", "Record",
];
const IDENTS: &[&str] = &[
    "input", "output", "state", "cursor", "value", "count", "offset", "item", "entry", "ctx",
];
const WORDS: &[&str] = &[
    "the", "value", "is", "checked", "before", "it", "reaches", "the", "store", "so", "a", "crash",
    "never", "loses", "an", "event", "that", "was", "shown",
];

/// One file of about `FILE_BYTES` of Rust-looking text.
fn source_file(rng: &mut XorShift) -> String {
    let mut out = String::with_capacity(FILE_BYTES + 256);
    while out.len() < FILE_BYTES {
        match rng.next() % 8 {
            0 => {
                out.push_str(&format!(
                    "pub fn {}_{}_v{}({}: &{}) -> Result<{}, Error> {{\n",
                    rng.pick(VERBS),
                    rng.pick(NOUNS),
                    rng.next() % 10,
                    rng.pick(IDENTS),
                    rng.pick(TYPES),
                    rng.pick(TYPES)
                ));
            }
            1 => {
                let words: Vec<&str> = (0..6 + rng.next() % 6).map(|_| rng.pick(WORDS)).collect();
                out.push_str(&format!("    // {}.\n", words.join(" ")));
            }
            2 => out.push_str(&format!(
                "    if {}.is_empty() {{ return Err(Error::Invalid{}); }}\n",
                rng.pick(IDENTS),
                rng.pick(TYPES)
            )),
            3 => out.push_str("}\n\n"),
            _ => out.push_str(&format!(
                "    let {} = {}.{}_{}(&{}, {})?;\n",
                rng.pick(IDENTS),
                rng.pick(IDENTS),
                rng.pick(VERBS),
                rng.pick(NOUNS),
                rng.pick(IDENTS),
                rng.next() % 100_000
            )),
        }
    }
    out
}
