//! How tandem and Codex app-server carry a conversation's history (issue 29): the cost of a turn
//! in sessions of 10 to 5,000 prior messages (time to the model request, its size, server CPU,
//! memory), how much of each model request repeats the previous one byte for byte over 20 tool
//! turns (what a provider's prompt cache can reuse), memory per open session, and memory of a
//! 500-turn session live and after a resume.
//!
//! Both servers run against a loopback mock in their own wire format (chat completions for
//! tandem, the Responses API for Codex) in the same run, as in `codex.rs`. The histories are
//! seeded with the same texts: tandem's through the library's `Store` as a server writes them
//! (`core::seed_session`), Codex's as a rollout file in the format Codex 0.171 writes, which
//! `thread/resume` reads; the first model request of every loaded session is checked to carry
//! the whole seeded history.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tandem::engine::history::{Message, Role};
use tandem_mock_llm::RecordedRequest;
use tempfile::TempDir;

use crate::anchors::tools_dir;
use crate::codex::{
    codex_config_with, codex_initialize, codex_thread_start, codex_turn, codex_version, spawn_codex,
};
use crate::common::*;
use crate::core::{seed_session, synthetic_turn};
use crate::mock::{Brain, MockLlm, MockOptions, Reply, Wire};
use crate::rpc::{
    tandem_close, tandem_command_with_config, tandem_initialize, tandem_new_session, tandem_turn,
    RpcChild,
};

/// Prior messages of the loaded sessions: whole turns of `core::synthetic_turn` (ten messages).
const SIZES: [usize; 4] = [10, 100, 1_000, 5_000];
const WARMUP_TURNS: usize = 1;
const MEASURED_TURNS: usize = 7;
/// Before a memory reading: whatever a server does right after a load or a turn counts.
const SETTLE: Duration = Duration::from_secs(1);
/// After a turn's end and before its CPU reading, so work a server finishes just after it
/// reports the end (a rollout flush, a commit) is counted in that turn, not the next.
const QUIET_AFTER_TURN: Duration = Duration::from_millis(100);
const PREFIX_PROMPTS: usize = 20;
const SESSION_COUNTS: [usize; 4] = [1, 10, 50, 200];
const LONG_TURNS: usize = 500;
const RESUMED_TURNS: usize = 20;

/// The model id of tandem's config and of the seeded sessions.
const MODEL_ID: &str = "mock";
/// Large enough that neither server compacts a 5,000-message history: the figures are the cost
/// of carrying it, not of summarizing it.
const CONTEXT_WINDOW: u64 = 100_000_000;
/// What the mock answers to every plain prompt.
const ANSWER: &str = "Noted.";
/// What the mock answers once a prompt's tool call has run (it checks the output first).
const TOOL_TURN_ANSWER: &str = "done";

/// The targets: tandem's figure ÷ Codex's (the first two at 5,000 messages), except the prefix
/// and the resumed session's growth, which are tandem's own ratios.
const FIRST_BYTE_TARGET: (f64, &str) = (0.05, "≤ 0.05×");
const CPU_TARGET: (f64, &str) = (0.10, "≤ 0.10×");
const RSS_GROWTH_TARGET: (f64, &str) = (0.5, "≤ 0.5×");
const PREFIX_TARGET: (f64, &str) = (1.02, "≤ 1.02×");
const PER_SESSION_TARGET: (f64, &str) = (0.05, "≤ 0.05×");
const RESUMED_GROWTH_TARGET: (f64, &str) = (1.3, "≤ 1.3×");

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tandem,
    Codex,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Tandem => "tandem",
            Kind::Codex => "Codex",
        }
    }

    fn wire(self) -> Wire {
        match self {
            Kind::Tandem => Wire::ChatCompletions,
            Kind::Codex => Wire::Responses,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The figures and the table

/// One history size, one server.
struct SizeRun {
    rss_loaded: u64,
    rss_after: u64,
    first_byte: Duration,
    /// The warm-up: the first prompt after the load (tandem parses the stored history then).
    first_prompt_first_byte: Duration,
    cpu: Duration,
    cpu_mean: Duration,
    body_bytes: usize,
    /// What the first request held, as checked against the seed.
    carried: String,
}

/// The 20 tool turns of one server.
struct PrefixRun {
    requests: usize,
    body_bytes: u64,
    resent: u64,
    append_only: u64,
    worst: Option<WorstPair>,
    /// `(resent, append-only)` again over each body's prompt parts in the prompt's order.
    prompt_order: (u64, u64),
    /// The top-level members of the first body, in the order they were sent.
    members: Vec<String>,
    /// Summed over the turns as the server reported them: `(prompt, cached)` tokens.
    tokens: (u64, u64),
}

/// The consecutive pair whose resent bytes exceed the appended ones the most.
struct WorstPair {
    /// 1-based numbers of the two requests.
    pair: (usize, usize),
    offset: usize,
    lengths: (usize, usize),
    excess: u64,
    before: String,
    after: String,
}

struct SessionsRun {
    rss: Vec<(usize, u64)>,
    per_session_kib: f64,
    elapsed: Duration,
    /// Processes in the server's tree with the most sessions open.
    processes: usize,
}

struct LongRun {
    /// History entries (tandem) or turns (Codex) the load answered with.
    shown: usize,
    live_rss: u64,
    loaded_rss: u64,
    after_rss: u64,
    live_elapsed: Duration,
}

pub struct HistoryFigures {
    sizes: Vec<(usize, [SizeRun; 2])>,
    prefix: [PrefixRun; 2],
    sessions: [SessionsRun; 2],
    long: [LongRun; 2],
    codex_items_per_message: f64,
    version: String,
    elapsed: Duration,
}

const CODEX: &str = "Codex app-server";

impl HistoryFigures {
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let last = SIZES[SIZES.len() - 1];
        for (size, [tandem, codex]) in &self.sizes {
            let target = (*size == last).then_some(FIRST_BYTE_TARGET);
            rows.push(ratio_row(
                &format!(
                    "History {}: prompt → first byte of the model request, median of {MEASURED_TURNS} (request body)",
                    messages(*size)
                ),
                format!(
                    "{} ({})",
                    format_duration(tandem.first_byte),
                    format_bytes(tandem.body_bytes)
                ),
                format!(
                    "{} ({}) ({CODEX})",
                    format_duration(codex.first_byte),
                    format_bytes(codex.body_bytes)
                ),
                (
                    tandem.first_byte.as_secs_f64(),
                    codex.first_byte.as_secs_f64(),
                ),
                target,
            ));
        }
        for (size, [tandem, codex]) in &self.sizes {
            let target = (*size == last).then_some(CPU_TARGET);
            rows.push(ratio_row(
                &format!(
                    "History {}: server CPU per turn (user+sys of the process tree), mean of {MEASURED_TURNS} (median)",
                    messages(*size)
                ),
                format!("{} ({})", format_cpu(tandem.cpu_mean), format_cpu(tandem.cpu)),
                format!(
                    "{} ({}) ({CODEX})",
                    format_cpu(codex.cpu_mean),
                    format_cpu(codex.cpu)
                ),
                // The mean: the kernel counts CPU in 10 ms ticks, so a median of turns that
                // take a few ms each is 0 or 10 ms; the mean is the total over the turns.
                (tandem.cpu_mean.as_secs_f64(), codex.cpu_mean.as_secs_f64()),
                target,
            ));
        }
        for (size, [tandem, codex]) in &self.sizes {
            rows.push(ratio_row(
                &format!(
                    "History {}: RSS of the process tree after the load → after {} turns",
                    messages(*size),
                    WARMUP_TURNS + MEASURED_TURNS
                ),
                format!(
                    "{} → {}",
                    format_kib(tandem.rss_loaded),
                    format_kib(tandem.rss_after)
                ),
                format!(
                    "{} → {} ({CODEX})",
                    format_kib(codex.rss_loaded),
                    format_kib(codex.rss_after)
                ),
                (tandem.rss_after as f64, codex.rss_after as f64),
                None,
            ));
        }
        let [tandem_growth, codex_growth] = [0, 1].map(|i| self.rss_growth_per_thousand(i));
        rows.push(Row::ratio_of(
            "RSS growth per 1,000 messages: (RSS@5,000 − RSS@1,000) / 4, after the turns",
            format_signed_kib(tandem_growth),
            format!("{} ({CODEX})", format_signed_kib(codex_growth)),
            tandem_growth,
            codex_growth,
            RSS_GROWTH_TARGET,
        ));

        let [tandem, codex] = &self.prefix;
        rows.push(Row::own_ratio(
            &format!(
                "Prompt-cache prefix over {PREFIX_PROMPTS} tool turns: bytes resent ÷ append-only bytes (all consecutive request pairs)"
            ),
            prefix_cell(tandem),
            format!("{} ({CODEX})", prefix_cell(codex)),
            tandem.ratio(),
            PREFIX_TARGET,
        ));
        rows.push(Row::reported(
            "The same over the prompt in a provider's order: `tools`, then the conversation, request options left out (diagnostic)",
            format!(
                "{:.2}× ({} resent)",
                fraction(tandem.prompt_order),
                format_bytes(tandem.prompt_order.0 as usize)
            ),
            format!(
                "{:.2}× ({} resent) ({CODEX})",
                fraction(codex.prompt_order),
                format_bytes(codex.prompt_order.0 as usize)
            ),
            "—".to_owned(),
        ));
        rows.push(Row::reported(
            &format!(
                "Cached prompt tokens over the {PREFIX_PROMPTS} turns, as the server reports them (mock: cached = common prefix ÷ 4 bytes)"
            ),
            tokens_cell(tandem.tokens),
            format!("{} ({CODEX})", tokens_cell(codex.tokens)),
            ratio(share(tandem.tokens), share(codex.tokens)),
        ));

        let [tandem, codex] = &self.sessions;
        rows.push(Row::ratio_of(
            "Memory per session: (RSS@200 − RSS@1 sessions) / 199, one server",
            format_signed_kib(tandem.per_session_kib),
            format!("{} ({CODEX})", format_signed_kib(codex.per_session_kib)),
            tandem.per_session_kib,
            codex.per_session_kib,
            PER_SESSION_TARGET,
        ));
        rows.push(Row::reported(
            "RSS with 1 / 10 / 50 / 200 sessions (`session/new`, `thread/start`)",
            rss_series(&tandem.rss),
            format!("{} ({CODEX})", rss_series(&codex.rss)),
            ratio(
                tandem.rss.last().map_or(0, |r| r.1) as f64,
                codex.rss.last().map_or(0, |r| r.1) as f64,
            ),
        ));

        let [tandem, codex] = &self.long;
        rows.push(Row::reported(
            &format!("Long session: RSS after {LONG_TURNS} live turns (prompt → text)"),
            format_kib(tandem.live_rss),
            format!("{} ({CODEX})", format_kib(codex.live_rss)),
            ratio(tandem.live_rss as f64, codex.live_rss as f64),
        ));
        rows.push(Row::reported(
            "Long session resumed in a new server: RSS just after the load",
            format_kib(tandem.loaded_rss),
            format!("{} ({CODEX})", format_kib(codex.loaded_rss)),
            ratio(tandem.loaded_rss as f64, codex.loaded_rss as f64),
        ));
        rows.push(Row::own_ratio(
            &format!(
                "Long session resumed: RSS after {RESUMED_TURNS} more turns ÷ just loaded (each server's own)"
            ),
            long_cell(tandem),
            format!("{} ({CODEX})", long_cell(codex)),
            tandem.after_rss as f64 / tandem.loaded_rss.max(1) as f64,
            RESUMED_GROWTH_TARGET,
        ));
        rows
    }

    /// KiB per 1,000 messages between the two largest sizes (after the turns) of server `i`.
    fn rss_growth_per_thousand(&self, i: usize) -> f64 {
        let at = |size: usize| {
            self.sizes
                .iter()
                .find(|(s, _)| *s == size)
                .map_or(0.0, |(_, runs)| runs[i].rss_after as f64)
        };
        (at(5_000) - at(1_000)) / 4.0
    }

    pub fn note(&self) -> String {
        let mut note = format!(
            "History (`history`, {:.0} s): Codex `{}`. Sessions of 10, 100, 1,000 and 5,000 prior messages, whole turns of the \
             core benchmark's ten-message turn (a prompt, four tool rounds: `read_file`, `grep`, `edit_file`, `shell`, each \
             with a result of a few hundred bytes, and a final answer). tandem's are written with `tandem::store` as a server \
             writes them; Codex's as a rollout file (`sessions/YYYY/MM/DD/rollout-….jsonl`, a `session_meta` line with \
             `history_mode: \"paginated\"` and one `response_item` line per item, each with its `ordinal`, the format 0.171 \
             writes) with the same texts, {:.1} items per tandem message (an assistant message with text and a call is a \
             `message` and a `function_call` item). Each size in a fresh server (`session/load`, `thread/resume`), \
             {WARMUP_TURNS} warm-up + {MEASURED_TURNS} measured turns of prompt → one text answer. The first model request of \
             every load was checked to carry the whole seed (every seeded prompt and tool result, the first prompt and the \
             last answer): ",
            self.elapsed.as_secs_f64(),
            self.version,
            self.codex_items_per_message,
        );
        let carried: Vec<String> = self
            .sizes
            .iter()
            .map(|(size, [tandem, codex])| {
                format!(
                    "{}: tandem {}, Codex {}",
                    messages(*size),
                    tandem.carried,
                    codex.carried
                )
            })
            .collect();
        note.push_str(&carried.join("; "));
        note.push_str(". First byte: from just before the prompt is written to the server's stdin to the instant the mock could read the request's first byte. ");
        let first_prompts: Vec<String> = self
            .sizes
            .iter()
            .map(|(size, [tandem, codex])| {
                format!(
                    "{} {} / {}",
                    messages(*size),
                    format_duration(tandem.first_prompt_first_byte),
                    format_duration(codex.first_prompt_first_byte)
                )
            })
            .collect();
        note.push_str(&format!(
            "The warm-up turn (the first prompt after the load; tandem parses the stored history then), first byte tandem / Codex: {}. ",
            first_prompts.join(", ")
        ));
        note.push_str(&format!(
            "CPU: `utime + stime + cutime + cstime` from `/proc/PID/stat` summed over the process tree, from just before the \
             prompt to {} ms after the turn's end; the kernel counts it in 10 ms ticks, so a median of short turns is 0 or \
             10 ms, and the mean beside it is the finer figure.",
            QUIET_AFTER_TURN.as_millis(),
        ));

        let [tandem, codex] = &self.prefix;
        note.push_str(&format!(
            "\n\nPrompt-cache prefix: one fresh session, {PREFIX_PROMPTS} prompts, each answered by one tool call and then a text \
             (tandem: `read_file` of a 40-byte workspace file, a different one per prompt; Codex: `exec_command` `echo hi` with \
             `require_escalated`, approved), so {} requests (tandem) and {} (Codex), {} and {} of request body. For every \
             consecutive pair, resent = len(req_i) − common byte prefix(req_i, req_i−1); append-only = max(0, len(req_i) − \
             len(req_i−1)). The mock reports usage as a prefix cache would (prompt tokens = body bytes ÷ 4, cached tokens = the \
             common prefix with the session's previous request ÷ 4; Codex's session is its `prompt_cache_key`); tandem's \
             figure sums its `usage` events' `inputTokens`/`cachedTokens`, Codex's is its thread total from \
             `thread/tokenUsage/updated`. Where the worst pair first differs: {}; Codex: {}. The bodies' top-level members \
             in the order sent: tandem {}; Codex {}. Both send `tools` after the conversation, so with the raw bodies every request \
             resends the tool definitions (and the options after them) behind its first difference; the diagnostic row compares \
             the prompt parts in the order a provider renders them (tool definitions, instructions, conversation) and leaves \
             the request options out.",
            tandem.requests,
            codex.requests,
            format_bytes(tandem.body_bytes as usize),
            format_bytes(codex.body_bytes as usize),
            worst_text(tandem),
            worst_text(codex),
            member_list(&tandem.members),
            member_list(&codex.members),
        ));

        let [tandem, codex] = &self.sessions;
        note.push_str(&format!(
            "\n\nSessions: one server each, sessions created back to back (tandem `session/new`, Codex `thread/start`) in one \
             workspace, RSS {} s after reaching each count; creating the 200 took {} (tandem) and {} (Codex), after which the \
             process tree had {} process(es) (tandem) and {} (Codex).",
            SETTLE.as_secs(),
            format_seconds(tandem.elapsed),
            format_seconds(codex.elapsed),
            tandem.processes,
            codex.processes,
        ));
        let [tandem, codex] = &self.long;
        note.push_str(&format!(
            "\n\nLong session: one live session, {LONG_TURNS} turns of prompt → text, which took {} (tandem) and {} (Codex); \
             RSS {} s after the last; then the server is closed, a new one loads the session (`session/load`; `thread/resume` \
             without `excludeTurns`, so both answer with the history to show: {} entries from tandem, {} turns from Codex), \
             RSS {} s after the load, then {RESUMED_TURNS} more turns and RSS {} s after them.",
            format_seconds(tandem.live_elapsed),
            format_seconds(codex.live_elapsed),
            SETTLE.as_secs(),
            tandem.shown,
            codex.shown,
            SETTLE.as_secs(),
            SETTLE.as_secs(),
        ));
        note
    }
}

/// The rows' names, for a run without Codex.
pub fn not_run_rows(why: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for size in SIZES {
        for (what, target) in [
            (
                "prompt → first byte of the model request",
                "≤ 0.05× at 5,000",
            ),
            ("server CPU per turn", "≤ 0.10× at 5,000"),
            ("RSS after the load → after the turns", "reported"),
        ] {
            rows.push(Row::failed(
                &format!("History {}: {what}", messages(size)),
                why,
                target,
            ));
        }
    }
    for (what, target) in [
        ("RSS growth per 1,000 messages", RSS_GROWTH_TARGET.1),
        (
            "Prompt-cache prefix over 20 tool turns: bytes resent ÷ append-only bytes",
            PREFIX_TARGET.1,
        ),
        (
            "The same over the prompt in a provider's order (diagnostic)",
            "reported",
        ),
        ("Cached prompt tokens over the 20 turns", "reported"),
        ("Memory per session", PER_SESSION_TARGET.1),
        ("RSS with 1 / 10 / 50 / 200 sessions", "reported"),
        ("Long session: RSS after the live turns", "reported"),
        ("Long session resumed: RSS just after the load", "reported"),
        (
            "Long session resumed: RSS after 20 more turns ÷ just loaded",
            RESUMED_GROWTH_TARGET.1,
        ),
    ] {
        rows.push(Row::failed(what, why, target));
    }
    rows
}

/// A tandem-to-Codex row whose target applies only where `target` is given.
fn ratio_row(
    measure: &str,
    tandem: String,
    anchor: String,
    (tandem_value, anchor_value): (f64, f64),
    target: Option<(f64, &str)>,
) -> Row {
    match target {
        Some(target) => Row::ratio_of(measure, tandem, anchor, tandem_value, anchor_value, target),
        None => {
            let ratio = if anchor_value > 0.0 {
                format!("{:.2}×", tandem_value / anchor_value)
            } else {
                "—".to_owned()
            };
            Row::reported(measure, tandem, anchor, ratio)
        }
    }
}

fn messages(size: usize) -> String {
    if size >= 1_000 {
        format!("{},{:03} messages", size / 1_000, size % 1_000)
    } else {
        format!("{size} messages")
    }
}

fn format_cpu(cpu: Duration) -> String {
    format!("{:.1} ms", cpu.as_secs_f64() * 1000.0)
}

fn format_seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format_duration(d)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn format_signed_kib(kib: f64) -> String {
    let mb = kib / 1024.0;
    if mb.abs() < 0.1 {
        format!("{kib:+.0} kB")
    } else {
        format!("{mb:+.2} MB")
    }
}

fn rss_series(rss: &[(usize, u64)]) -> String {
    rss.iter()
        .map(|(_, kib)| format!("{:.1}", *kib as f64 / 1024.0))
        .collect::<Vec<_>>()
        .join(" / ")
        + " MB"
}

fn share((prompt, cached): (u64, u64)) -> f64 {
    if prompt == 0 {
        0.0
    } else {
        cached as f64 / prompt as f64
    }
}

fn tokens_cell(tokens: (u64, u64)) -> String {
    format!(
        "{} of {} ({:.0}%)",
        tokens.1,
        tokens.0,
        share(tokens) * 100.0
    )
}

fn prefix_cell(run: &PrefixRun) -> String {
    format!(
        "{:.2}× ({} resent, {} appended)",
        run.ratio(),
        format_bytes(run.resent as usize),
        format_bytes(run.append_only as usize)
    )
}

fn long_cell(run: &LongRun) -> String {
    format!(
        "{} → {}",
        format_kib(run.loaded_rss),
        format_kib(run.after_rss)
    )
}

fn worst_text(run: &PrefixRun) -> String {
    match &run.worst {
        None => "no pair resent more than it appended".to_owned(),
        Some(w) => format!(
            "requests {} → {} ({} → {} bytes, {} resent beyond the appended bytes) first differ at byte {}: {} vs {}",
            w.pair.0,
            w.pair.1,
            w.lengths.0,
            w.lengths.1,
            format_bytes(w.excess as usize),
            w.offset,
            w.before,
            w.after
        ),
    }
}

impl PrefixRun {
    fn ratio(&self) -> f64 {
        fraction((self.resent, self.append_only))
    }
}

/// `resent ÷ append-only`, not a number when nothing was appended.
fn fraction((resent, append_only): (u64, u64)) -> f64 {
    if append_only == 0 {
        f64::NAN
    } else {
        resent as f64 / append_only as f64
    }
}

fn member_list(members: &[String]) -> String {
    members
        .iter()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// The servers

/// A server's home: tandem's config and data dir, or a `CODEX_HOME`; and its workspace.
struct Home {
    kind: Kind,
    program: PathBuf,
    dir: TempDir,
    workspace: TempDir,
}

impl Home {
    fn new(kind: Kind, program: &Path) -> Result<Home> {
        let dir = match kind {
            Kind::Tandem => tempfile::tempdir()?,
            Kind::Codex => {
                // Codex refuses to set up its helper links under the system temp dir.
                let scratch = tools_dir().join("tmp");
                std::fs::create_dir_all(&scratch)?;
                tempfile::Builder::new()
                    .prefix("codex-home-")
                    .tempdir_in(&scratch)?
            }
        };
        let workspace = tempfile::tempdir()?;
        std::fs::write(workspace.path().join("README.md"), "benchmark workspace\n")?;
        for i in 1..=PREFIX_PROMPTS {
            std::fs::write(
                workspace.path().join(note_file(i)),
                format!("note {i:02}: from the benchmark workspace\n"),
            )?;
        }
        Ok(Home {
            kind,
            program: program.to_owned(),
            dir,
            workspace,
        })
    }

    /// The database `tandem serve --data-dir <dir>/data` opens.
    fn tandem_database(&self) -> Result<PathBuf> {
        let data = self.dir.path().join("data");
        std::fs::create_dir_all(&data)?;
        Ok(tandem::store::default_database_path(Some(&data)))
    }

    /// Spawns the server with its config pointed at `mock_url`, and initializes it.
    async fn start(&self, mock_url: &str) -> Result<Server> {
        let child = match self.kind {
            Kind::Tandem => {
                let command = tandem_command_with_config(
                    &self.program,
                    self.dir.path(),
                    &tandem_config(mock_url),
                    self.workspace.path(),
                )?;
                RpcChild::spawn("tandem", command, self.dir.path().join("tandem-stderr.log"))?
            }
            Kind::Codex => {
                std::fs::write(
                    self.dir.path().join("config.toml"),
                    codex_config_with(mock_url, &codex_settings()),
                )?;
                spawn_codex(&self.program, self.dir.path(), self.workspace.path())?
            }
        };
        let mut server = Server {
            kind: self.kind,
            child,
        };
        let result = match self.kind {
            Kind::Tandem => tandem_initialize(&mut server.child).await.map(|_| ()),
            Kind::Codex => codex_initialize(&mut server.child).await,
        };
        server.check(result)?;
        Ok(server)
    }

    /// One start and close, so the measured starts find the home as an editor does on every
    /// start after the first (Codex sets up its databases and helpers on the first).
    async fn warm_up(&self, mock_url: &str) -> Result<()> {
        self.start(mock_url).await?.close().await
    }
}

fn note_file(i: usize) -> String {
    format!("note_{i:02}.txt")
}

/// tandem's config: the OpenAI-compatible provider on the mock, with a context window no
/// history here comes near.
fn tandem_config(base_url: &str) -> String {
    format!(
        "default_model = \"{MODEL_ID}\"\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\n\
         [models.{MODEL_ID}]\nprovider = \"local\"\nname = \"mock-model\"\ncontext_window = {CONTEXT_WINDOW}\n"
    )
}

/// The same for Codex, on top of `codex.rs`'s config: no auto-compaction either.
fn codex_settings() -> String {
    format!(
        "model_context_window = {CONTEXT_WINDOW}\nmodel_auto_compact_token_limit = {CONTEXT_WINDOW}\n"
    )
}

/// What one turn showed on the wire.
struct TurnOutcome {
    text: String,
    approvals: usize,
    /// tandem: `(inputTokens, cachedTokens)` of each `usage` event.
    usage: Vec<(u64, u64)>,
    /// Codex: the thread's `(inputTokens, cachedInputTokens)` totals after the turn.
    totals: (u64, u64),
}

struct Server {
    kind: Kind,
    child: RpcChild,
}

impl Server {
    fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// A failure with the end of the server's stderr.
    fn check<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|error| format!("{error}{}", self.child.stderr_tail()).into())
    }

    async fn new_session(&mut self, cwd: &Path) -> Result<String> {
        let result = match self.kind {
            Kind::Tandem => tandem_new_session(&mut self.child, cwd).await,
            Kind::Codex => codex_thread_start(&mut self.child, cwd).await,
        };
        self.check(result)
    }

    /// `session/load` or `thread/resume`; how many history entries (tandem) or turns (Codex)
    /// the answer shows.
    async fn load(&mut self, id: &str) -> Result<usize> {
        let result = match self.kind {
            Kind::Tandem => self
                .child
                .request("session/load", json!({"sessionId": id}))
                .await
                .and_then(|r| {
                    if r["sessionId"] != id {
                        return Err(format!("unexpected session/load result for {id}").into());
                    }
                    Ok(r["messages"].as_array().map_or(0, Vec::len))
                }),
            Kind::Codex => self
                .child
                .request("thread/resume", json!({"threadId": id}))
                .await
                .and_then(|r| {
                    if r["thread"]["id"] != id {
                        return Err(format!("unexpected thread/resume result for {id}").into());
                    }
                    Ok(r["thread"]["turns"].as_array().map_or(0, Vec::len))
                }),
        };
        self.check(result)
    }

    async fn turn(&mut self, id: &str, prompt: &str) -> Result<TurnOutcome> {
        let result = match self.kind {
            Kind::Tandem => tandem_turn(&mut self.child, id, prompt)
                .await
                .map(|log| TurnOutcome {
                    text: log.text,
                    approvals: log.approvals,
                    usage: log.usage,
                    totals: (0, 0),
                }),
            Kind::Codex => codex_turn(&mut self.child, id, prompt)
                .await
                .map(|turn| TurnOutcome {
                    text: turn.text,
                    approvals: turn.approvals,
                    usage: Vec::new(),
                    totals: turn.total_tokens,
                }),
        };
        self.check(result)
    }

    async fn rss_after_settle(&self) -> Result<u64> {
        // A measurement point, not a synchronisation: what the server does meanwhile counts.
        tokio::time::sleep(SETTLE).await;
        self.check(tree_rss_kib(self.pid()))
    }

    async fn close(mut self) -> Result<()> {
        match self.kind {
            Kind::Tandem => tandem_close(&mut self.child).await,
            Kind::Codex => self.child.close(),
        }
    }
}

/// A mock that answers every request with `ANSWER`.
fn answer_brain() -> Brain {
    Arc::new(|_: &Value| Reply::Text(ANSWER.to_owned()))
}

/// A mock for one server run, keeping the raw bodies.
async fn mock_for(kind: Kind, brain: Brain, prefix_cache: bool) -> Result<MockLlm> {
    MockLlm::start_with(
        kind.wire(),
        brain,
        MockOptions {
            keep_raw_bodies: true,
            prefix_cache,
        },
    )
    .await
}

fn check_answer(kind: Kind, outcome: &TurnOutcome, expected: &str) -> Result<()> {
    if outcome.text.trim() != expected {
        return Err(format!(
            "the {} turn ended with the text {:?}, expected {expected:?}",
            kind.name(),
            outcome.text
        )
        .into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Seeding Codex's history

/// Writes a rollout of `messages` tandem messages' worth of Responses items (the same
/// `synthetic_turn`s tandem's session holds) into `CODEX_HOME/sessions/YYYY/MM/DD/`, as Codex
/// 0.171 writes a paginated thread: a `session_meta` line, then one `response_item` line per
/// item, every line with its `ordinal` (Codex refuses a paginated rollout without them).
/// Returns the thread id and the number of items.
fn write_codex_rollout(home: &Path, cwd: &Path, messages: usize) -> Result<(String, usize)> {
    let thread_id = uuid::Uuid::new_v4().to_string();
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
    let stamps = UtcStamps::of(now);
    let dir = home.join("sessions").join(&stamps.day_dir);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("rollout-{}-{thread_id}.jsonl", stamps.file));
    let mut out = BufWriter::new(std::fs::File::create(&path)?);
    let meta = json!({
        "timestamp": stamps.rfc3339,
        "ordinal": 0,
        "type": "session_meta",
        "payload": {
            "id": thread_id,
            "timestamp": stamps.rfc3339,
            "cwd": cwd,
            "originator": "tandem-bench",
            "cli_version": crate::anchors::CODEX_VERSION,
            "source": "vscode",
            "model_provider": "mock",
            "history_mode": "paginated",
        },
    });
    writeln!(out, "{meta}")?;
    let mut ordinal = 1;
    let mut written = 0;
    let mut turn = 0;
    while written < messages {
        let mut turn_messages = synthetic_turn(turn, MODEL_ID);
        turn_messages.truncate(messages - written);
        for message in &turn_messages {
            for item in codex_items(message) {
                let line = json!({
                    "timestamp": stamps.rfc3339,
                    "ordinal": ordinal,
                    "type": "response_item",
                    "payload": item,
                });
                writeln!(out, "{line}")?;
                ordinal += 1;
            }
            written += 1;
        }
        turn += 1;
    }
    out.flush()?;
    Ok((thread_id, ordinal - 1))
}

/// A tandem message as the Responses items that say the same: a prompt is a user `message`; an
/// assistant message its text as an assistant `message` (when it has text) and one
/// `function_call` per call; a tool result a `function_call_output`. Reasoning stays out, as
/// tandem does not send it back to the model either.
fn codex_items(message: &Message) -> Vec<Value> {
    let text = message.text();
    match message.role {
        Role::User => {
            vec![json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})]
        }
        Role::Assistant => {
            let mut items = Vec::new();
            if !text.is_empty() {
                items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}));
            }
            for call in &message.tool_calls {
                items.push(json!({"type": "function_call", "name": call.name, "arguments": call.arguments, "call_id": call.id}));
            }
            items
        }
        Role::Tool => message
            .tool_result
            .as_ref()
            .map(|result| json!({"type": "function_call_output", "call_id": result.tool_call_id, "output": text}))
            .into_iter()
            .collect(),
        Role::Notice => Vec::new(),
    }
}

/// The UTC forms of one instant a rollout needs.
struct UtcStamps {
    /// `2026-12-07T17:13:55.720Z`
    rfc3339: String,
    /// `2026-12-07T17-13-55`, in the file name.
    file: String,
    /// `2026/12/07`
    day_dir: PathBuf,
}

impl UtcStamps {
    fn of(since_epoch: Duration) -> UtcStamps {
        let secs = since_epoch.as_secs();
        let (year, month, day) = civil_from_days((secs / 86_400) as i64);
        let (hour, minute, second) = (secs % 86_400 / 3_600, secs % 3_600 / 60, secs % 60);
        let millis = since_epoch.subsec_millis();
        UtcStamps {
            rfc3339: format!(
                "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z"
            ),
            file: format!("{year:04}-{month:02}-{day:02}T{hour:02}-{minute:02}-{second:02}"),
            day_dir: PathBuf::from(format!("{year:04}"))
                .join(format!("{month:02}"))
                .join(format!("{day:02}")),
        }
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Checks that a model request carries the whole seed of `messages` messages: every seeded
/// prompt and tool result, the first prompt and the last answer. Returns what it held.
fn check_carried(kind: Kind, body: &Value, messages: usize) -> Result<String> {
    let turns = messages / 10;
    let (entries, results, prompts) = match kind {
        Kind::Tandem => {
            let list = body["messages"].as_array().map_or(&[][..], Vec::as_slice);
            (
                list.len(),
                list.iter().filter(|m| m["role"] == "tool").count(),
                list.iter()
                    .filter(|m| m["role"] == "user" && is_seeded_prompt(&m["content"]))
                    .count(),
            )
        }
        Kind::Codex => {
            let list = body["input"].as_array().map_or(&[][..], Vec::as_slice);
            (
                list.len(),
                list.iter()
                    .filter(|i| i["type"] == "function_call_output")
                    .count(),
                list.iter()
                    .filter(|i| i["role"] == "user" && is_seeded_prompt(&i["content"]))
                    .count(),
            )
        }
    };
    let text = body.to_string();
    let first = "handle_0 returns the wrong error when the input is empty";
    let last = format!(
        "handle_{} now returns Error::InvalidInput",
        turns.saturating_sub(1)
    );
    if results != 4 * turns || prompts != turns || !text.contains(first) || !text.contains(&last) {
        return Err(format!(
            "the first {} model request after loading a {messages}-message session does not carry it: \
             {results} tool results (seeded {}), {prompts} seeded prompts (seeded {turns}), first prompt {}, last answer {}",
            kind.name(),
            4 * turns,
            if text.contains(first) { "present" } else { "missing" },
            if text.contains(&last) { "present" } else { "missing" },
        )
        .into());
    }
    Ok(match kind {
        Kind::Tandem => format!("{entries} messages"),
        Kind::Codex => format!("{entries} input items"),
    })
}

fn is_seeded_prompt(content: &Value) -> bool {
    content.to_string().contains("In src/module_")
}

// ---------------------------------------------------------------------------------------------
// The measurements

pub fn measure(
    bin: &Path,
    codex: &Path,
    runtime: &tokio::runtime::Runtime,
) -> Result<HistoryFigures> {
    let version = codex_version(codex)?;
    let start = Instant::now();
    runtime.block_on(async {
        let programs = [bin, codex];
        let (sizes, codex_items_per_message) = history_sizes(programs).await?;
        progress(&format!(
            "history: prompt-cache prefix, {PREFIX_PROMPTS} tool turns each"
        ));
        let prefix = [
            prefix_run(Kind::Tandem, bin).await?,
            prefix_run(Kind::Codex, codex).await?,
        ];
        progress(&format!(
            "history: memory with {SESSION_COUNTS:?} sessions, one server each"
        ));
        let sessions = [
            sessions_run(Kind::Tandem, bin).await?,
            sessions_run(Kind::Codex, codex).await?,
        ];
        progress(&format!(
            "history: a session of {LONG_TURNS} live turns, then its resume, each server"
        ));
        let long = [
            long_run(Kind::Tandem, bin).await?,
            long_run(Kind::Codex, codex).await?,
        ];
        Ok(HistoryFigures {
            sizes,
            prefix,
            sessions,
            long,
            codex_items_per_message,
            version,
            elapsed: start.elapsed(),
        })
    })
}

type SizeFigures = Vec<(usize, [SizeRun; 2])>;

/// Seeds every size into one home per server, then measures the sizes in turn, each in a fresh
/// server, alternating the servers.
async fn history_sizes(programs: [&Path; 2]) -> Result<(SizeFigures, f64)> {
    progress(&format!(
        "history: seeding sessions of {SIZES:?} messages for both servers"
    ));
    let homes = [
        Home::new(Kind::Tandem, programs[0])?,
        Home::new(Kind::Codex, programs[1])?,
    ];
    let mut ids: [Vec<String>; 2] = Default::default();
    let mut codex_items = 0;
    let database = homes[0].tandem_database()?;
    for size in SIZES {
        let seeded = seed_session(&database, homes[0].workspace.path(), MODEL_ID, size)?;
        ids[0].push(seeded.session_id);
        let (thread_id, items) =
            write_codex_rollout(homes[1].dir.path(), homes[1].workspace.path(), size)?;
        ids[1].push(thread_id);
        codex_items = items;
    }
    let items_per_message = codex_items as f64 / SIZES[SIZES.len() - 1] as f64;
    // Seeded before the first start, so Codex indexes the rollouts as it does the threads it
    // wrote itself.
    for home in &homes {
        let mock = mock_for(home.kind, answer_brain(), false).await?;
        home.warm_up(&mock.base_url).await?;
    }
    let mut figures = Vec::new();
    for (n, size) in SIZES.into_iter().enumerate() {
        progress(&format!(
            "history: {} — load, {WARMUP_TURNS} warm-up + {MEASURED_TURNS} turns, each server",
            messages(size)
        ));
        let tandem = size_run(&homes[0], &ids[0][n], size).await?;
        let codex = size_run(&homes[1], &ids[1][n], size).await?;
        figures.push((size, [tandem, codex]));
    }
    Ok((figures, items_per_message))
}

async fn size_run(home: &Home, id: &str, size: usize) -> Result<SizeRun> {
    let mock = mock_for(home.kind, answer_brain(), false).await?;
    let mut server = home.start(&mock.base_url).await?;
    let shown = server.load(id).await?;
    if home.kind == Kind::Tandem && shown == 0 {
        return Err(format!("session/load of the {size}-message session showed nothing").into());
    }
    let rss_loaded = server.rss_after_settle().await?;
    let mut first_bytes = Vec::new();
    let mut cpus = Vec::new();
    let mut bodies = Vec::new();
    let mut first_prompt_first_byte = Duration::ZERO;
    let mut carried = String::new();
    for turn in 0..WARMUP_TURNS + MEASURED_TURNS {
        let prompt = format!("Turn {turn}: say where we are in one word.");
        let first_request = mock.requests();
        let cpu_before = server.check(tree_cpu_time(server.pid()))?;
        let sent = Instant::now();
        let outcome = server.turn(id, &prompt).await?;
        tokio::time::sleep(QUIET_AFTER_TURN).await;
        // Saturating: a child that exits before it is reaped drops out of the sum for a moment.
        let cpu = server
            .check(tree_cpu_time(server.pid()))?
            .saturating_sub(cpu_before);
        check_answer(home.kind, &outcome, ANSWER)?;
        let records = mock.recorded_since(first_request);
        let request = turn_request(home.kind, &records, &prompt)?;
        let first_byte = request.first_byte_at.saturating_duration_since(sent);
        let body_bytes = request.raw_body.as_ref().map_or(0, |b| b.len());
        if turn == 0 {
            carried = check_carried(home.kind, &request.body, size)?;
            first_prompt_first_byte = first_byte;
        }
        if turn >= WARMUP_TURNS {
            first_bytes.push(first_byte);
            cpus.push(cpu);
            bodies.push(body_bytes as u64);
        }
    }
    let rss_after = server.rss_after_settle().await?;
    server.close().await?;
    let cpu_mean = cpus.iter().sum::<Duration>() / cpus.len().max(1) as u32;
    Ok(SizeRun {
        rss_loaded,
        rss_after,
        first_byte: summarize(first_bytes).median,
        first_prompt_first_byte,
        cpu: summarize(cpus).median,
        cpu_mean,
        body_bytes: median_u64(bodies) as usize,
        carried,
    })
}

/// The model request of a turn: the first one recorded after the prompt that carries it.
fn turn_request<'a>(
    kind: Kind,
    records: &'a [RecordedRequest],
    prompt: &str,
) -> Result<&'a RecordedRequest> {
    records
        .iter()
        .find(|r| r.body.to_string().contains(prompt))
        .ok_or_else(|| {
            format!(
                "none of the {} model request(s) {} made during the turn carries its prompt",
                records.len(),
                kind.name()
            )
            .into()
        })
}

/// The prefix comparison over all the requests of one session: each request's answer is one
/// tool call, then a text once the call's output is in.
async fn prefix_run(kind: Kind, program: &Path) -> Result<PrefixRun> {
    let home = Home::new(kind, program)?;
    let mock = mock_for(kind, tool_brain(kind), true).await?;
    home.warm_up(&mock.base_url).await?;
    let first_request = mock.requests();
    let mut server = home.start(&mock.base_url).await?;
    let session = server.new_session(home.workspace.path()).await?;
    let mut tokens = (0, 0);
    for step in 1..=PREFIX_PROMPTS {
        let prompt = match kind {
            Kind::Tandem => format!(
                "Step {step} of {PREFIX_PROMPTS}: read {} and tell me what it says.",
                note_file(step)
            ),
            Kind::Codex => format!(
                "Step {step} of {PREFIX_PROMPTS}: run `echo hi` in the shell and tell me what it printed."
            ),
        };
        let outcome = server.turn(&session, &prompt).await?;
        check_answer(kind, &outcome, TOOL_TURN_ANSWER)?;
        if kind == Kind::Codex && outcome.approvals != 1 {
            return Err(format!(
                "the Codex tool turn answered {} approvals, expected 1",
                outcome.approvals
            )
            .into());
        }
        match kind {
            Kind::Tandem => {
                for (prompt, cached) in &outcome.usage {
                    tokens.0 += prompt;
                    tokens.1 += cached;
                }
            }
            Kind::Codex => tokens = outcome.totals,
        }
    }
    server.close().await?;
    let records = mock.recorded_since(first_request);
    let bodies: Vec<&[u8]> = records
        .iter()
        .map(|r| r.raw_body.as_deref().unwrap_or_default())
        .collect();
    if bodies.len() < 2 * PREFIX_PROMPTS {
        return Err(format!(
            "{} made {} model requests for {PREFIX_PROMPTS} tool turns, expected at least {}",
            kind.name(),
            bodies.len(),
            2 * PREFIX_PROMPTS
        )
        .into());
    }
    compare_prefixes(&bodies, tokens)
}

/// Resent and append-only bytes over consecutive pairs, and the worst pair; then the same over
/// the bodies' prompt parts in the prompt's order (`prompt_order`).
fn compare_prefixes(bodies: &[&[u8]], tokens: (u64, u64)) -> Result<PrefixRun> {
    let mut run = compare_raw(bodies, tokens);
    let reordered = bodies
        .iter()
        .map(|body| prompt_order(body))
        .collect::<Result<Vec<_>>>()?;
    let reordered: Vec<&[u8]> = reordered.iter().map(Vec::as_slice).collect();
    let again = compare_raw(&reordered, tokens);
    run.prompt_order = (again.resent, again.append_only);
    run.members = top_level_members(bodies.first().copied().unwrap_or_default())?
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    Ok(run)
}

fn compare_raw(bodies: &[&[u8]], tokens: (u64, u64)) -> PrefixRun {
    let mut resent = 0;
    let mut append_only = 0;
    let mut worst: Option<WorstPair> = None;
    for (i, pair) in bodies.windows(2).enumerate() {
        let (before, after) = (pair[0], pair[1]);
        let shared = common_prefix_len(before, after);
        let sent_again = (after.len() - shared) as u64;
        let appended = after.len().saturating_sub(before.len()) as u64;
        resent += sent_again;
        append_only += appended;
        let excess = sent_again.saturating_sub(appended);
        if excess > 0 && worst.as_ref().is_none_or(|w| excess > w.excess) {
            worst = Some(WorstPair {
                pair: (i + 1, i + 2),
                offset: shared,
                lengths: (before.len(), after.len()),
                excess,
                before: context(before, shared),
                after: context(after, shared),
            });
        }
    }
    PrefixRun {
        requests: bodies.len(),
        body_bytes: bodies.iter().map(|b| b.len() as u64).sum(),
        resent,
        append_only,
        worst,
        prompt_order: (0, 0),
        members: Vec::new(),
        tokens,
    }
}

/// The parts of a request body a provider renders into the prompt, in the prompt's order: the
/// tool definitions (`tools`), the instructions (`instructions`, when the body has them), then
/// the conversation (`messages` or `input`), each as sent, joined by commas. The request's
/// options (`model`, `stream`, `store`, `prompt_cache_key`, …) are not prompt text and are left
/// out. Not the JSON sent: what a cache keyed on the prompt's prefix would compare.
fn prompt_order(body: &[u8]) -> Result<Vec<u8>> {
    let members = top_level_members(body)?;
    let mut out = Vec::with_capacity(body.len());
    for part in ["tools", "instructions", "messages", "input"] {
        for (_, span) in members.iter().filter(|(key, _)| key == part) {
            out.extend_from_slice(&body[span.clone()]);
            out.push(b',');
        }
    }
    Ok(out)
}

/// The top-level members of a JSON object as sent: each key with the byte range of its
/// `"key": value` text.
fn top_level_members(body: &[u8]) -> Result<Vec<(String, std::ops::Range<usize>)>> {
    let malformed = || -> BoxError { "a model request body is not a JSON object".into() };
    let mut members = Vec::new();
    let mut i = skip_whitespace(body, 0);
    if body.get(i) != Some(&b'{') {
        return Err(malformed());
    }
    i += 1;
    loop {
        i = skip_whitespace(body, i);
        match body.get(i).ok_or_else(malformed)? {
            b'}' => return Ok(members),
            b',' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let start = i;
        let key_end = string_end(body, i).ok_or_else(malformed)?;
        let key: String = serde_json::from_slice(&body[i..key_end])?;
        i = skip_whitespace(body, key_end);
        if body.get(i) != Some(&b':') {
            return Err(malformed());
        }
        i = value_end(body, i + 1).ok_or_else(malformed)?;
        members.push((key, start..i));
    }
}

fn skip_whitespace(body: &[u8], mut i: usize) -> usize {
    while body.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The index just past the string that starts (with its quote) at `i`.
fn string_end(body: &[u8], i: usize) -> Option<usize> {
    if body.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        match *body.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
}

/// The index just past the value that starts at or after `i` (a scalar ends before the `,` or
/// `}` that follows it).
fn value_end(body: &[u8], i: usize) -> Option<usize> {
    let mut i = skip_whitespace(body, i);
    let mut depth = 0usize;
    loop {
        match *body.get(i)? {
            b'"' => {
                i = string_end(body, i)?;
                if depth == 0 {
                    return Some(i);
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth == 0 => return Some(i),
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b',' if depth == 0 => return Some(i),
            _ => {}
        }
        i += 1;
    }
}

/// About 60 bytes around `offset` (20 before it), quoted, for the note.
fn context(body: &[u8], offset: usize) -> String {
    let start = offset.saturating_sub(20);
    let end = (start + 60).min(body.len());
    let text = String::from_utf8_lossy(&body[start.min(end)..end]);
    format!(
        "`{}`",
        format!("{text:?}").replace('`', "'").replace('|', "\\|")
    )
}

/// The tool-turn model: a call first (tandem: `read_file` of the prompt's note file; Codex:
/// `codex.rs`'s approved `echo hi`), then `TOOL_TURN_ANSWER` once the call's output is in.
fn tool_brain(kind: Kind) -> Brain {
    Arc::new(move |request: &Value| {
        let step = step_number(kind, request);
        let results = match kind {
            Kind::Tandem => crate::mock::chat_tool_results(request),
            Kind::Codex => crate::mock::responses_tool_results(request),
        };
        if results > 0 {
            let output = last_tool_output(request).unwrap_or_default();
            let expected = match kind {
                Kind::Tandem => format!("note {step:02}"),
                Kind::Codex => "hi".to_owned(),
            };
            return Reply::Text(if output.contains(&expected) {
                TOOL_TURN_ANSWER.to_owned()
            } else {
                format!("the tool output was {output:?}")
            });
        }
        Reply::ToolCalls(vec![match kind {
            Kind::Tandem => (
                format!("call_read_{step}"),
                "read_file".to_owned(),
                json!({"path": note_file(step)}).to_string(),
            ),
            Kind::Codex => (
                format!("call_echo_{step}"),
                "exec_command".to_owned(),
                json!({
                    "cmd": "echo hi",
                    "sandbox_permissions": "require_escalated",
                    "justification": "The user asked to run echo hi.",
                    "login": false,
                })
                .to_string(),
            ),
        }])
    })
}

/// The `N` of the newest prompt's "Step N of …".
fn step_number(kind: Kind, request: &Value) -> usize {
    let list = match kind {
        Kind::Tandem => request["messages"].as_array(),
        Kind::Codex => request["input"].as_array(),
    };
    list.into_iter()
        .flatten()
        .rev()
        .filter(|m| m["role"] == "user")
        .find_map(|m| {
            let text = m["content"].to_string();
            let rest = &text[text.find("Step ")? + 5..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or(0)
}

/// The text of the newest tool result of a chat-completions or Responses request.
fn last_tool_output(request: &Value) -> Option<String> {
    if let Some(messages) = request["messages"].as_array() {
        return messages
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].to_string());
    }
    request["input"].as_array().and_then(|input| {
        input
            .iter()
            .rev()
            .find(|item| item["type"] == "function_call_output")
            .map(|item| item["output"].to_string())
    })
}

/// RSS of one server after 1, 10, 50 and 200 sessions.
async fn sessions_run(kind: Kind, program: &Path) -> Result<SessionsRun> {
    let home = Home::new(kind, program)?;
    let mock = mock_for(kind, answer_brain(), false).await?;
    home.warm_up(&mock.base_url).await?;
    let mut server = home.start(&mock.base_url).await?;
    let mut rss = Vec::new();
    let mut created = 0;
    let mut creating = Duration::ZERO;
    for count in SESSION_COUNTS {
        let start = Instant::now();
        while created < count {
            server.new_session(home.workspace.path()).await?;
            created += 1;
        }
        creating += start.elapsed();
        rss.push((count, server.rss_after_settle().await?));
    }
    let processes = process_tree(server.pid()).len();
    server.close().await?;
    let first = rss.first().map_or(0, |r| r.1) as f64;
    let last = rss.last().map_or(0, |r| r.1) as f64;
    let span = (SESSION_COUNTS[SESSION_COUNTS.len() - 1] - SESSION_COUNTS[0]) as f64;
    Ok(SessionsRun {
        per_session_kib: (last - first) / span,
        rss,
        elapsed: creating,
        processes,
    })
}

/// A session of `LONG_TURNS` live turns, then its resume in a new server and `RESUMED_TURNS`
/// more.
async fn long_run(kind: Kind, program: &Path) -> Result<LongRun> {
    let home = Home::new(kind, program)?;
    let mock = mock_for(kind, answer_brain(), false).await?;
    home.warm_up(&mock.base_url).await?;
    let mut server = home.start(&mock.base_url).await?;
    let session = server.new_session(home.workspace.path()).await?;
    let start = Instant::now();
    for turn in 0..LONG_TURNS {
        let outcome = server
            .turn(
                &session,
                &format!("Turn {turn}: say where we are in one word."),
            )
            .await?;
        check_answer(kind, &outcome, ANSWER)?;
    }
    let live_elapsed = start.elapsed();
    let live_rss = server.rss_after_settle().await?;
    server.close().await?;

    let mut server = home.start(&mock.base_url).await?;
    let shown = server.load(&session).await?;
    let loaded_rss = server.rss_after_settle().await?;
    for turn in 0..RESUMED_TURNS {
        let outcome = server
            .turn(
                &session,
                &format!("Resumed turn {turn}: say where we are in one word."),
            )
            .await?;
        check_answer(kind, &outcome, ANSWER)?;
    }
    let after_rss = server.rss_after_settle().await?;
    server.close().await?;
    Ok(LongRun {
        shown,
        live_rss,
        loaded_rss,
        after_rss,
        live_elapsed,
    })
}
