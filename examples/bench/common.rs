//! Helpers every benchmark shares: errors, progress lines, the binary under test, statistics, memory
//! readings from /proc, and the table rows with their verdicts.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, BoxError>;

/// Generous: every scripted turn in the suite takes well under a second, but Codex app-server
/// holding 200 threads on this 2-core machine once took more than 30 s to answer a
/// `thread/start` (load average above 20 from its own processes).
pub const TURN_TIMEOUT: Duration = Duration::from_secs(120);
/// The same Codex took more than 5 s to exit once with 200 threads open.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

pub fn progress(message: &str) {
    eprintln!("bench: {message}");
}

// ---------------------------------------------------------------------------------------------
// The binary under test

/// The cargo target directory this benchmark was built into: the example runs from
/// `<target>/release/examples/`, so the server binary of the same build sits two levels up.
pub fn target_dir() -> PathBuf {
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        let examples = exe.parent()?;
        let profile = examples.parent()?;
        Some(profile.parent()?.to_path_buf())
    });
    from_exe
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// An explicit path must exist; the default one (`<target>/release/tandem`) is built when it is
/// missing or older than the sources, because `cargo run --example` does not build the server
/// binary and the figures must describe the code checked out.
pub fn resolve_binary(explicit: Option<PathBuf>) -> Result<PathBuf> {
    let explicit = explicit.or_else(|| std::env::var_os("TANDEM_BIN").map(PathBuf::from));
    if let Some(path) = explicit {
        if !path.is_file() {
            return Err(format!("the tandem binary {} does not exist", path.display()).into());
        }
        // Absolute, because the benchmarks spawn it from their own temp working directories.
        return Ok(path.canonicalize()?);
    }
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = target_dir();
    let path = target.join("release/tandem");
    let why = if !path.is_file() {
        Some("is missing")
    } else if !newer_sources(&path, manifest_dir).is_empty() {
        Some("is older than the sources")
    } else {
        None
    };
    if let Some(why) = why {
        progress(&format!(
            "{} {why}: running `cargo build --release --bin tandem` first",
            path.display()
        ));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let status = Command::new(cargo)
            .args(["build", "--release", "--bin", "tandem"])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(manifest_dir)
            .status()?;
        if !status.success() || !path.is_file() {
            return Err(format!("`cargo build --release` failed ({status})").into());
        }
    }
    warn_if_stale(&path, manifest_dir);
    Ok(path)
}

/// Source files changed after `bin` was built.
fn newer_sources(bin: &Path, manifest_dir: &Path) -> Vec<PathBuf> {
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return Vec::new();
    };
    let mut newer = Vec::new();
    collect_newer(&manifest_dir.join("src"), built, &mut newer);
    collect_newer(&manifest_dir.join("Cargo.toml"), built, &mut newer);
    newer
}

/// Says when the figures would describe older sources than the ones checked out (a build that
/// left the binary untouched, say).
pub fn warn_if_stale(bin: &Path, manifest_dir: &Path) {
    let newer = newer_sources(bin, manifest_dir);
    if !newer.is_empty() {
        progress(&format!(
            "warning: {} is older than {} source file(s) (e.g. {}); run `cargo build --release` to measure the current sources",
            bin.display(),
            newer.len(),
            newer[0].display()
        ));
    }
}

pub fn collect_newer(path: &Path, than: std::time::SystemTime, newer: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            collect_newer(&entry.path(), than, newer);
        }
    } else if meta.modified().is_ok_and(|m| m > than) {
        newer.push(path.to_owned());
    }
}

/// End of stdin must make the server exit; a hang is reported rather than waited out.
pub fn wait_or_kill(child: &mut Child, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill()?;
    child.wait()?;
    Err(format!(
        "process {} did not exit within {timeout:?} of its stdin closing",
        child.id()
    )
    .into())
}

/// Drop a binary's pages from the kernel's page cache before its idle memory is sampled, so
/// every binary is measured from the same state: read back from disk by the first sample. A
/// binary the linker (or `cp`) has just written sits in the cache as it was written, and its
/// mapped code then counted up to 3 MB more of resident memory for the same process (13.4 MB
/// against 10.5 MB of tandem's code, measured with `/proc/PID/smaps`; 16.2 against 13.1 MB of
/// the whole tree for one binary just copied and the same binary a minute later), which made a
/// fresh build look larger than an older one. Written back first: the kernel keeps pages that
/// are still dirty.
pub fn drop_cached_pages(path: &Path) -> Result<()> {
    let file = std::fs::File::open(path)?;
    file.sync_all()?;
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
    Ok(())
}

/// VmRSS of a live process, in KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS line in /proc/PID/status")?;
    let kib = line
        .split_whitespace()
        .nth(1)
        .ok_or("malformed VmRSS line")?
        .parse()?;
    Ok(kib)
}

/// One `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .ok_or_else(|| format!("no {field} line in /proc/{pid}/status"))?;
    let kib = line
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| format!("malformed {field} line"))?
        .parse()?;
    Ok(kib)
}

/// The process and all its live descendants, found by scanning `/proc/*/stat` for parent ids
/// (this kernel has no `/proc/PID/task/TID/children`).
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // The command name is in parentheses and may hold spaces; the parent id is the
            // second field after the closing one.
            let Some(ppid) = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parent_of
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    tree
}

/// The sum of VmRSS over the process tree, in KiB. Shared pages count once per process, as
/// `ps` would show them; processes that exit mid-scan are skipped.
pub fn tree_rss_kib(root: u32) -> Result<u64> {
    let total = process_tree(root)
        .into_iter()
        .filter_map(|pid| status_kib(pid, "VmRSS").ok())
        .sum();
    if total == 0 {
        return Err(format!("process {root} has no readable memory figures").into());
    }
    Ok(total)
}

/// `/proc/PID/stat` counts CPU time in USER_HZ ticks, which the Linux ABI fixes at 100 per
/// second on every architecture the suite runs on (`getconf CLK_TCK`).
const USER_HZ: u64 = 100;

/// CPU time (user + system) a process tree has used, from `/proc/PID/stat`: for each live
/// process its `utime + stime` (every thread, exited ones included) plus `cutime + cstime` (the
/// children it has waited for), so a child that ran and was reaped inside a window still counts,
/// once. The resolution is one tick (10 ms); compare deltas over a window, not single readings.
pub fn tree_cpu_time(root: u32) -> Result<Duration> {
    let mut ticks = 0;
    let mut read_root = false;
    for pid in process_tree(root) {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the parenthesised command name: field 3 (state) is index 0, so utime (14),
        // stime (15), cutime (16) and cstime (17) are indexes 11 to 14.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        for index in 11..=14 {
            ticks += fields
                .get(index)
                .and_then(|f| f.parse::<u64>().ok())
                .ok_or_else(|| format!("malformed /proc/{pid}/stat"))?;
        }
        read_root |= pid == root;
    }
    if !read_root {
        return Err(format!("process {root} has no readable /proc/PID/stat").into());
    }
    Ok(Duration::from_millis(ticks * 1000 / USER_HZ))
}

/// How many leading bytes `a` and `b` share.
pub fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    // Blocks first: a slice comparison is one memcmp, so megabyte bodies compare quickly.
    while i + 64 <= n && a[i..i + 64] == b[i..i + 64] {
        i += 64;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Samples the tree RSS of a process on a thread until stopped, keeping the largest sum.
pub struct PeakSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
    root: u32,
}

/// Often enough to see a short-lived child such as the shell of a tool call.
const PEAK_SAMPLE_EVERY: Duration = Duration::from_millis(2);

impl PeakSampler {
    pub fn start(root: u32) -> PeakSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(kib) = tree_rss_kib(root) {
                    peak = peak.max(kib);
                }
                std::thread::sleep(PEAK_SAMPLE_EVERY);
            }
            peak
        });
        PeakSampler { stop, thread, root }
    }

    /// The sampled peak, raised to the root's own high-water mark (`VmHWM`) in case its peak
    /// fell between two samples.
    pub fn finish(self) -> Result<u64> {
        let (sampled, own_peak) = self.finish_parts()?;
        Ok(sampled.max(own_peak))
    }

    /// The sampled peak of the whole tree and the root's own `VmHWM`, apart, for a report that
    /// gives both (the root must still be alive).
    pub fn finish_parts(self) -> Result<(u64, u64)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let sampled = self.thread.join().map_err(|_| "the RSS sampler panicked")?;
        let own_peak = status_kib(self.root, "VmHWM")?;
        Ok((sampled, own_peak))
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and the report

pub struct Summary {
    pub median: Duration,
    pub p90: Duration,
    pub p99: Duration,
}

pub fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort_unstable();
    Summary {
        median: percentile(&samples, 50.0),
        p90: percentile(&samples, 90.0),
        p99: percentile(&samples, 99.0),
    }
}

/// Nearest-rank percentile of sorted, non-empty samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn median_u64(mut samples: Vec<u64>) -> u64 {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// One line of a results table: a figure, its anchor from the same run, their ratio and whether
/// the target holds.
pub struct Row {
    pub measure: String,
    pub tandem: String,
    pub anchor: String,
    pub ratio: String,
    pub target: String,
    pub verdict: &'static str,
}

impl Row {
    pub fn duration(
        measure: &str,
        tandem: Duration,
        anchor: Duration,
        anchor_name: &str,
        target: Option<(Duration, &str)>,
    ) -> Row {
        Row {
            measure: measure.to_owned(),
            tandem: format_duration(tandem),
            anchor: format!("{} ({anchor_name})", format_duration(anchor)),
            ratio: ratio(tandem.as_secs_f64(), anchor.as_secs_f64()),
            target: target.map_or("—", |(_, label)| label).to_owned(),
            verdict: match target {
                Some((t, _)) if tandem <= t => "met",
                Some(_) => "**missed**",
                None => "—",
            },
        }
    }

    /// A figure whose target is a ratio to its anchor; at most `max_ratio` times the anchor
    /// counts as met. The ratio gets more digits, because a 5% target needs them.
    pub fn within_ratio(
        measure: &str,
        tandem: Duration,
        anchor: Duration,
        anchor_name: &str,
        (max_ratio, target_label): (f64, &str),
    ) -> Row {
        Row::ratio_of(
            measure,
            format_duration(tandem),
            format!("{} ({anchor_name})", format_duration(anchor)),
            tandem.as_secs_f64(),
            anchor.as_secs_f64(),
            (max_ratio, target_label),
        )
    }

    /// Like `within_ratio`, for memory figures in KiB.
    pub fn memory_ratio(
        measure: &str,
        tandem_kib: u64,
        anchor_kib: u64,
        anchor_name: &str,
        (max_ratio, target_label): (f64, &str),
    ) -> Row {
        Row::ratio_of(
            measure,
            format_kib(tandem_kib),
            format!("{} ({anchor_name})", format_kib(anchor_kib)),
            tandem_kib as f64,
            anchor_kib as f64,
            (max_ratio, target_label),
        )
    }

    /// Any pair of already formatted figures with the values their ratio is computed from.
    pub fn ratio_of(
        measure: &str,
        tandem: String,
        anchor: String,
        tandem_value: f64,
        anchor_value: f64,
        (max_ratio, target_label): (f64, &str),
    ) -> Row {
        let valid = anchor_value > 0.0;
        let value = tandem_value / anchor_value.max(f64::MIN_POSITIVE);
        Row {
            measure: measure.to_owned(),
            tandem,
            anchor,
            ratio: if valid {
                format!("{value:.2}×")
            } else {
                "—".to_owned()
            },
            target: target_label.to_owned(),
            verdict: if valid && value <= max_ratio {
                "met"
            } else {
                "**missed**"
            },
        }
    }

    /// A figure whose target is on tandem's own ratio (to its own baseline, or of two of its own
    /// amounts), with the anchor's same ratio beside it for comparison: the ratio column is
    /// tandem's value.
    pub fn own_ratio(
        measure: &str,
        tandem: String,
        anchor: String,
        value: f64,
        (max_ratio, target_label): (f64, &str),
    ) -> Row {
        let valid = value.is_finite();
        Row {
            measure: measure.to_owned(),
            tandem,
            anchor,
            ratio: if valid {
                format!("{value:.2}×")
            } else {
                "—".to_owned()
            },
            target: target_label.to_owned(),
            verdict: if valid && value <= max_ratio {
                "met"
            } else {
                "**missed**"
            },
        }
    }

    /// A figure reported without a target (the issue asks for it, but names no bound).
    pub fn reported(measure: &str, tandem: String, anchor: String, ratio: String) -> Row {
        Row {
            measure: measure.to_owned(),
            tandem,
            anchor,
            ratio,
            target: "reported".to_owned(),
            verdict: "—",
        }
    }

    pub fn memory(
        measure: &str,
        tandem_kib: u64,
        anchor_kib: u64,
        (target_kib, target_label): (u64, &str),
    ) -> Row {
        Row {
            measure: measure.to_owned(),
            tandem: format_kib(tandem_kib),
            anchor: format!("{} (`/bin/cat`)", format_kib(anchor_kib)),
            ratio: ratio(tandem_kib as f64, anchor_kib as f64),
            target: target_label.to_owned(),
            verdict: if tandem_kib < target_kib {
                "met"
            } else {
                "**missed**"
            },
        }
    }

    /// A measurement that could not be taken (an anchor that failed to install, say); the table
    /// keeps the line so the gap is visible.
    pub fn failed(measure: &str, why: &str, target: &str) -> Row {
        Row {
            measure: measure.to_owned(),
            tandem: "—".to_owned(),
            anchor: format!("not measured: {why}"),
            ratio: "—".to_owned(),
            target: target.to_owned(),
            verdict: "**not run**",
        }
    }
}

pub fn print_table(title: &str, rows: &[Row]) {
    println!();
    println!("### {title}");
    println!();
    println!("| Measure | tandem | Anchor (same run) | Ratio | Target | Status |");
    println!("|---|---:|---:|---:|---:|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            row.measure, row.tandem, row.anchor, row.ratio, row.target, row.verdict
        );
    }
}

/// CPU count, CPU model and kernel, for the line under a table.
pub fn machine() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{nproc} CPUs, {}, Linux {}", cpu_model(), kernel.trim())
}

pub fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{ms:.3} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

pub fn format_kib(kib: u64) -> String {
    format!("{:.1} MB", kib as f64 / 1024.0)
}

pub fn ratio(value: f64, anchor: f64) -> String {
    if anchor > 0.0 {
        format!("{:.1}×", value / anchor)
    } else {
        "—".to_owned()
    }
}

pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

pub fn format_bytes(bytes: usize) -> String {
    if bytes < 10_000 {
        format!("{bytes} B")
    } else {
        format!("{:.1} kB", bytes as f64 / 1e3)
    }
}

/// `a − b`, with its sign.
pub fn format_signed_duration(a: Duration, b: Duration) -> String {
    if a >= b {
        format!("+{}", format_duration(a - b))
    } else {
        format!("−{}", format_duration(b - a))
    }
}
