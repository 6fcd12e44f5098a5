//! Load: 50 sessions in one `tandem serve` streaming at once, each turn 400 deltas paced 5 ms
//! apart by the mock (10,000 deltas/s offered in total). Reports the deltas per second that
//! reached stdout and the latency of each delta (the mock's write to the line being read), beside
//! the same 50 streams consumed in-process by the reqwest + SSE + serde floor.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::common::*;
use crate::mock::{MockLlm, Reply, StreamShape, Wire};
use crate::rpc::{spawn_tandem, tandem_close, tandem_initialize, tandem_new_session};

const SESSIONS: usize = 50;
const SHAPE: StreamShape = StreamShape {
    deltas: 400,
    pace: Some(Duration::from_millis(5)),
};

pub struct LoadFigures {
    tandem: Stats,
    floor: Stats,
}

struct Stats {
    rate: f64,
    latency: Summary,
}

impl LoadFigures {
    pub fn rows(&self) -> Vec<Row> {
        vec![
            Row::reported(
                &format!(
                    "Load: {SESSIONS} concurrent sessions, deltas per second reaching the client"
                ),
                format!("{:.0}/s", self.tandem.rate),
                format!("{:.0}/s (in-process floor, same streams)", self.floor.rate),
                format!(
                    "{:.2}×",
                    self.tandem.rate / self.floor.rate.max(f64::MIN_POSITIVE)
                ),
            ),
            Row::reported(
                "Load: delta latency p50 / p99",
                format!(
                    "{} / {}",
                    format_duration(self.tandem.latency.median),
                    format_duration(self.tandem.latency.p99)
                ),
                format!(
                    "{} / {} (floor)",
                    format_duration(self.floor.latency.median),
                    format_duration(self.floor.latency.p99)
                ),
                format!(
                    "{:.2}× (p99)",
                    self.tandem.latency.p99.as_secs_f64()
                        / self.floor.latency.p99.as_secs_f64().max(f64::MIN_POSITIVE)
                ),
            ),
        ]
    }

    pub fn note(&self) -> String {
        format!(
            "Load: one `tandem serve`, {SESSIONS} sessions prompted back to back; the mock streams {} deltas per turn, {} ms apart, \
             {:.0} deltas/s offered in total. Rate: deltas read from stdout over the time from the first mock write to the last line read. \
             Floor: the same {SESSIONS} streams read concurrently in this process by reqwest + eventsource-stream + serde_json.",
            SHAPE.deltas,
            SHAPE.pace.map_or(0, |p| p.as_millis()),
            SESSIONS as f64 / SHAPE.pace.map_or(1.0, |p| p.as_secs_f64()),
        )
    }
}

pub fn measure(bin: &Path, runtime: &tokio::runtime::Runtime) -> Result<LoadFigures> {
    progress(&format!(
        "load: {SESSIONS} sessions x {} deltas, floor then tandem",
        SHAPE.deltas
    ));
    runtime.block_on(async {
        let floor = floor().await?;
        let tandem = tandem_load(bin).await?;
        Ok(LoadFigures { tandem, floor })
    })
}

/// `"load 17"` → tag `"17"`.
fn brain(request: &Value) -> Reply {
    let prompt = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let tag = prompt
        .split("load ")
        .nth(1)
        .map(|rest| rest.chars().take_while(char::is_ascii_digit).collect())
        .unwrap_or_default();
    Reply::TaggedDeltas(SHAPE, tag)
}

/// Arrival instants by (tag, delta number), from texts like `"17:3 "`.
#[derive(Default)]
struct Arrivals(HashMap<(String, usize), Instant>);

impl Arrivals {
    fn record(&mut self, text: &str, at: Instant) -> Result<()> {
        for token in text.split_whitespace() {
            let (tag, n) = token
                .split_once(':')
                .ok_or_else(|| format!("delta text {text:?} has no tag"))?;
            let n: usize = n.parse()?;
            self.0.entry((tag.to_owned(), n)).or_insert(at);
        }
        Ok(())
    }

    fn stats(&self, sends: &[(String, Vec<Instant>)]) -> Result<Stats> {
        let mut latencies = Vec::with_capacity(SESSIONS * SHAPE.deltas);
        let mut first_send: Option<Instant> = None;
        let mut last_arrival: Option<Instant> = None;
        for (tag, times) in sends {
            for (n, sent) in times.iter().enumerate() {
                let arrived = self
                    .0
                    .get(&(tag.clone(), n))
                    .ok_or_else(|| format!("delta {tag}:{n} never arrived"))?;
                latencies.push(arrived.saturating_duration_since(*sent));
                first_send = Some(first_send.map_or(*sent, |f| f.min(*sent)));
                last_arrival = Some(last_arrival.map_or(*arrived, |l| l.max(*arrived)));
            }
        }
        let span = match (first_send, last_arrival) {
            (Some(first), Some(last)) => last.saturating_duration_since(first),
            _ => return Err("no deltas were streamed".into()),
        };
        let count = latencies.len();
        if count != SESSIONS * SHAPE.deltas {
            return Err(format!(
                "{count} of {} deltas were streamed",
                SESSIONS * SHAPE.deltas
            )
            .into());
        }
        Ok(Stats {
            rate: count as f64 / span.as_secs_f64(),
            latency: summarize(latencies),
        })
    }
}

async fn collect_sends(mock: &mut MockLlm) -> Result<Vec<(String, Vec<Instant>)>> {
    let mut sends = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        sends.push(mock.next_tagged_send_times().await?);
    }
    Ok(sends)
}

async fn tandem_load(bin: &Path) -> Result<Stats> {
    let mut mock = MockLlm::start(Wire::ChatCompletions, Arc::new(brain)).await?;
    let dir = tempfile::tempdir()?;
    let workspace = tempfile::tempdir()?;
    let mut server = spawn_tandem(bin, dir.path(), &mock.base_url, workspace.path())?;
    let result = async {
        tandem_initialize(&mut server).await?;
        let mut sessions = Vec::with_capacity(SESSIONS);
        for _ in 0..SESSIONS {
            sessions.push(tandem_new_session(&mut server, workspace.path()).await?);
        }
        for (i, session) in sessions.iter().enumerate() {
            server.send_request(
                "prompt",
                json!({"sessionId": session, "content": format!("load {i}")}),
            )?;
        }
        let mut arrivals = Arrivals::default();
        let mut ended = 0;
        while ended < SESSIONS {
            let (at, message) = server.next_message().await?;
            if let Some(error) = message.get("error") {
                return Err(format!("a prompt failed: {error}").into());
            }
            if message["method"] != "session/event" {
                continue;
            }
            let params = &message["params"];
            match params["type"].as_str() {
                Some("assistantDelta") => {
                    arrivals.record(params["text"].as_str().unwrap_or_default(), at)?
                }
                Some("turnEnded") => {
                    if params["reason"] != "completed" {
                        return Err(format!("a turn did not complete: {params}").into());
                    }
                    ended += 1;
                }
                _ => {}
            }
        }
        let sends = collect_sends(&mut mock).await?;
        arrivals.stats(&sends)
    }
    .await;
    match result {
        Ok(stats) => {
            tandem_close(&mut server).await?;
            Ok(stats)
        }
        Err(error) => Err(format!("{error}{}", server.stderr_tail()).into()),
    }
}

/// The same 50 streams read in-process, each by the minimal pipeline.
async fn floor() -> Result<Stats> {
    let mut mock = MockLlm::start(Wire::ChatCompletions, Arc::new(brain)).await?;
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let mut tasks = Vec::with_capacity(SESSIONS);
    for i in 0..SESSIONS {
        let client = client.clone();
        let url = format!("{}/chat/completions", mock.base_url);
        tasks.push(tokio::spawn(async move {
            let response = client
                .post(url)
                .json(&json!({"model": "mock-model", "stream": true, "messages": [{"role": "user", "content": format!("load {i}")}]}))
                .send()
                .await?
                .error_for_status()?;
            let mut events = response.bytes_stream().eventsource();
            let mut out: Vec<u8> = Vec::with_capacity(SHAPE.deltas * 160);
            let mut arrived = Vec::with_capacity(SHAPE.deltas);
            let mut seq = 0u64;
            while let Some(event) = events.next().await {
                let event = event?;
                if event.data == "[DONE]" {
                    break;
                }
                let chunk: Value = serde_json::from_str(&event.data)?;
                let Some(text) = chunk.pointer("/choices/0/delta/content").and_then(Value::as_str) else {
                    continue;
                };
                seq += 1;
                let line = json!({"jsonrpc": "2.0", "method": "session/event",
                    "params": {"sessionId": "bench", "seq": seq, "turnId": "t", "type": "assistantDelta", "text": text}});
                serde_json::to_writer(&mut out, &line)?;
                out.push(b'\n');
                arrived.push((text.to_owned(), Instant::now()));
            }
            Ok::<_, BoxError>(arrived)
        }));
    }
    let mut arrivals = Arrivals::default();
    for task in tasks {
        for (text, at) in task
            .await
            .map_err(|e| format!("a floor stream panicked: {e}"))??
        {
            arrivals.record(&text, at)?;
        }
    }
    let sends = collect_sends(&mut mock).await?;
    arrivals.stats(&sends)
}
