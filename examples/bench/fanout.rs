//! Fan-out: 16 `read_file` calls in one assistant message beside the same 16 reads made one per
//! model round trip.
//!
//! Both variants read the same 40-line windows near the end of 16 files of 40,000 lines each
//! (about 2.4 MB, so each read scans the file for line breaks) and end with the same final text:
//! - fan-out: one assistant message with 16 calls (tandem runs contiguous low-risk calls
//!   concurrently), then the final text: 2 model requests;
//! - sequential: 16 assistant messages with one call each, the next sent after the previous
//!   result, then the final text: 17 model requests. This is what a model without parallel tool
//!   calls does, and the only way to make tandem run the reads one after another.
//!
//! Both run in one `tandem serve`, a fresh session per turn, alternating, timed from `prompt` to
//! `turnEnded`. The table also gives the tool phase alone (from each call's `running` update to
//! its last `completed` one, summed over the batches), which isolates the concurrency from the
//! saved round trips.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use crate::mock::{chat_tool_results, MockLlm, Reply, Wire};
use crate::rpc::{
    spawn_tandem, tandem_close, tandem_initialize, tandem_new_session, tandem_turn, TurnLog,
};

const FILES: usize = 16;
const LINES_PER_FILE: usize = 40_000;
const WINDOW: usize = 40;
const WARMUPS: usize = 1;
/// Many runs, because on a shared 2-core machine single turns swing by a factor of two.
const RUNS: usize = 15;
const FANOUT_PROMPT: &str = "fanout: read the end of every file";
const SEQUENTIAL_PROMPT: &str = "sequential: read the end of every file";

pub struct FanoutFigures {
    fanout: Duration,
    sequential: Duration,
    fanout_tools: Duration,
    sequential_tools: Duration,
    fanout_requests: usize,
    sequential_requests: usize,
}

impl FanoutFigures {
    pub fn rows(&self) -> Vec<Row> {
        vec![
            Row::within_ratio(
                &format!("Fan-out: {FILES} read_file calls in one message, median turn (prompt → turnEnded)"),
                self.fanout,
                self.sequential,
                &format!("{FILES} sequential calls"),
                (0.6, "≤ 0.6×"),
            ),
            Row::within_ratio(
                "Fan-out: tool phase only (first `running` → last `completed`, per batch)",
                self.fanout_tools,
                self.sequential_tools,
                &format!("{FILES} sequential calls"),
                (0.6, "≤ 0.6× (diagnostic)"),
            ),
        ]
    }

    pub fn note(&self) -> String {
        format!(
            "Fan-out: {FILES} files of {LINES_PER_FILE} lines (about 2.4 MB each); every call reads lines {}–{}. \
             One assistant message with {FILES} calls ({} model requests per turn) vs one call per message ({} requests). \
             One `tandem serve`, a fresh session per turn, {RUNS} turns each after {WARMUPS} warm-up, alternating; {} CPUs.",
            LINES_PER_FILE - WINDOW + 1,
            LINES_PER_FILE,
            self.fanout_requests,
            self.sequential_requests,
            std::thread::available_parallelism().map_or(0, |n| n.get()),
        )
    }
}

pub fn measure(bin: &Path, runtime: &tokio::runtime::Runtime) -> Result<FanoutFigures> {
    let workspace = tempfile::tempdir()?;
    for file in 0..FILES {
        let text: String = (1..=LINES_PER_FILE)
            .map(|n| format!("line {n:>6} of file {file:>2}: some ordinary source text here\n"))
            .collect();
        std::fs::write(workspace.path().join(format!("file{file:02}.txt")), text)?;
    }
    let dir = tempfile::tempdir()?;
    progress(&format!(
        "fanout: {WARMUPS} warm-up + {RUNS} turns each of {FILES} reads, fan-out and sequential, alternating"
    ));
    runtime.block_on(async {
        let mock = MockLlm::start(Wire::ChatCompletions, Arc::new(brain)).await?;
        let mut server = spawn_tandem(bin, dir.path(), &mock.base_url, workspace.path())?;
        let result = async {
            tandem_initialize(&mut server).await?;
            let mut times = [Vec::new(), Vec::new()];
            let mut tools = [Vec::new(), Vec::new()];
            let mut requests = [0, 0];
            for run in 0..WARMUPS + RUNS {
                for (i, prompt) in [FANOUT_PROMPT, SEQUENTIAL_PROMPT].into_iter().enumerate() {
                    let session = tandem_new_session(&mut server, workspace.path()).await?;
                    let before = mock.requests();
                    let start = Instant::now();
                    let log = tandem_turn(&mut server, &session, prompt).await?;
                    let elapsed = start.elapsed();
                    requests[i] = mock.requests() - before;
                    check(&log)?;
                    if run >= WARMUPS {
                        times[i].push(elapsed);
                        tools[i].push(tool_phase(&log));
                    }
                }
            }
            let [fanout, sequential] = times.map(|t| summarize(t).median);
            let [fanout_tools, sequential_tools] = tools.map(|t| summarize(t).median);
            Ok::<_, BoxError>(FanoutFigures {
                fanout,
                sequential,
                fanout_tools,
                sequential_tools,
                fanout_requests: requests[0],
                sequential_requests: requests[1],
            })
        }
        .await;
        match result {
            Ok(figures) => {
                tandem_close(&mut server).await?;
                Ok(figures)
            }
            Err(error) => Err(format!("{error}{}", server.stderr_tail()).into()),
        }
    })
}

fn read_call(file: usize) -> (String, String, String) {
    (
        format!("call_read_{file}"),
        "read_file".to_owned(),
        json!({"path": format!("file{file:02}.txt"), "offset": LINES_PER_FILE - WINDOW + 1, "limit": WINDOW})
            .to_string(),
    )
}

/// The scripted model: the prompt says which variant; the tool results so far say which step.
fn brain(request: &Value) -> Reply {
    let done = chat_tool_results(request);
    let fanout = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .is_some_and(|m| m["content"].to_string().contains("fanout:"));
    if fanout && done == 0 {
        Reply::ToolCalls((0..FILES).map(read_call).collect())
    } else if !fanout && done < FILES {
        Reply::ToolCalls(vec![read_call(done)])
    } else {
        Reply::Text(format!("read {done} files"))
    }
}

/// Every read completed, and the model saw all of them.
fn check(log: &TurnLog) -> Result<()> {
    let completed = log
        .tool_updates
        .iter()
        .filter(|(_, status, _)| status == "completed")
        .count();
    if completed != FILES || log.text != format!("read {FILES} files") {
        return Err(format!(
            "the fan-out turn did not follow the script: {completed} completed reads, final text {:?}",
            log.text
        )
        .into());
    }
    Ok(())
}

/// Time spent running tools: for each call, its first `running` and its last `completed`
/// update; overlapping calls are merged into batches, and the batches' spans are summed.
fn tool_phase(log: &TurnLog) -> Duration {
    let mut spans: HashMap<&str, (Option<Instant>, Option<Instant>)> = HashMap::new();
    for (id, status, at) in &log.tool_updates {
        let span = spans.entry(id.as_str()).or_default();
        match status.as_str() {
            "running" => {
                span.0.get_or_insert(*at);
            }
            "completed" => span.1 = Some(*at),
            _ => {}
        }
    }
    let mut intervals: Vec<(Instant, Instant)> = spans
        .values()
        .filter_map(|(start, end)| Some(((*start)?, (*end)?)))
        .collect();
    intervals.sort();
    let mut total = Duration::ZERO;
    let mut current: Option<(Instant, Instant)> = None;
    for (start, end) in intervals {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        total += e - s;
    }
    total
}
