//! Loopback model servers for the benchmarks: an OpenAI-compatible chat-completions mock (what
//! tandem's `openai` provider talks to) and an OpenAI Responses API mock (what Codex talks to).
//!
//! Both are small hand-written HTTP/1.1 servers (one request per connection, `Connection: close`)
//! so the benchmark controls every byte and every pause. Each request is answered by a `Brain`
//! that looks at the request body, like a real model, so one mock serves whole scripted turns
//! (a tool call, then the final text once the tool result is in the history).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use crate::common::{progress, Result, TURN_TIMEOUT};

/// How the mock streams numbered text deltas.
#[derive(Clone, Copy)]
pub struct StreamShape {
    pub deltas: usize,
    /// `None`: every chunk is written (and flushed) as soon as the previous one is.
    pub pace: Option<Duration>,
}

/// One answer of the model.
pub enum Reply {
    /// `shape.deltas` chunks whose texts are `"0 "`, `"1 "`, …; their write instants are reported
    /// through `MockLlm::next_send_times`.
    Deltas(StreamShape),
    /// The same with each text prefixed by a tag (`"17:0 "`), so streams of many sessions can be
    /// told apart; reported through `MockLlm::next_tagged_send_times`.
    TaggedDeltas(StreamShape, String),
    /// Tool calls `(id, name, arguments JSON)` in one assistant message.
    ToolCalls(Vec<(String, String, String)>),
    /// A final text in one delta.
    Text(String),
    /// A hostile answer far larger than any real one, streamed in pieces (the floods benchmark).
    Flood(Flood),
}

/// What a flooding answer streams: `bytes` in all, `piece` bytes an event.
#[derive(Clone)]
pub enum Flood {
    /// Text deltas.
    Text { bytes: usize, piece: usize },
    /// One tool call whose arguments (`{"path":…,"content":"aaaa…`) are streamed piece by piece.
    ToolArguments {
        id: String,
        name: String,
        path: String,
        bytes: usize,
        piece: usize,
    },
}

/// Decides the reply from the request body.
pub type Brain = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// Which wire format the mock speaks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `POST /v1/chat/completions`, `chat.completion.chunk` events, `[DONE]`.
    ChatCompletions,
    /// `POST /v1/responses`, typed `response.*` events.
    Responses,
}

/// A model server on 127.0.0.1 with a random port.
pub struct MockLlm {
    pub base_url: String,
    send_times: mpsc::UnboundedReceiver<(String, Vec<Instant>)>,
    requests: Arc<std::sync::atomic::AtomicUsize>,
    flooded: Arc<std::sync::atomic::AtomicUsize>,
}

impl MockLlm {
    /// Every request is answered with the same numbered delta stream.
    pub async fn deltas(shape: StreamShape) -> Result<MockLlm> {
        MockLlm::start(
            Wire::ChatCompletions,
            Arc::new(move |_: &Value| Reply::Deltas(shape)),
        )
        .await
    }

    pub async fn start(wire: Wire, brain: Brain) -> Result<MockLlm> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let (tx, send_times) = mpsc::unbounded_channel();
        let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let flooded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counters = Counters {
            requests: requests.clone(),
            flooded: flooded.clone(),
        };
        tokio::spawn(accept_loop(listener, tx, wire, brain, counters));
        Ok(MockLlm {
            base_url,
            send_times,
            requests,
            flooded,
        })
    }

    /// The write instants of the next completed delta stream, indexed by delta number.
    pub async fn next_send_times(&mut self) -> Result<Vec<Instant>> {
        Ok(self.next_tagged_send_times().await?.1)
    }

    /// The tag and write instants of the next completed delta stream.
    pub async fn next_tagged_send_times(&mut self) -> Result<(String, Vec<Instant>)> {
        let times = tokio::time::timeout(TURN_TIMEOUT, self.send_times.recv())
            .await
            .map_err(|_| "the mock never finished a stream")?
            .ok_or("the mock server stopped")?;
        Ok(times)
    }

    /// Model requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes of `Reply::Flood` answers written into the socket so far (all connections): how
    /// much of a flood got out before tandem hung up.
    pub fn flooded_bytes(&self) -> usize {
        self.flooded.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What the connections count for `MockLlm`.
#[derive(Clone)]
struct Counters {
    requests: Arc<std::sync::atomic::AtomicUsize>,
    flooded: Arc<std::sync::atomic::AtomicUsize>,
}

async fn accept_loop(
    listener: TcpListener,
    tx: mpsc::UnboundedSender<(String, Vec<Instant>)>,
    wire: Wire,
    brain: Brain,
    counters: Counters,
) {
    while let Ok((stream, _)) = listener.accept().await {
        let tx = tx.clone();
        let brain = brain.clone();
        let counters = counters.clone();
        tokio::spawn(async move {
            match serve_connection(stream, wire, &brain, &counters).await {
                Ok(Some(times)) => {
                    let _ = tx.send(times);
                }
                Ok(None) => {}
                Err(error) => progress(&format!("mock server: connection failed: {error}")),
            }
        });
    }
}

/// One request per connection; `Some` with the send instants when it streamed numbered deltas.
async fn serve_connection(
    mut stream: TcpStream,
    wire: Wire,
    brain: &Brain,
    counters: &Counters,
) -> Result<Option<(String, Vec<Instant>)>> {
    // Without NODELAY, Nagle would hold small chunks back and the figures would measure it.
    stream.set_nodelay(true)?;
    let (request_line, body) = read_request(&mut stream).await?;
    let expected = match wire {
        Wire::ChatCompletions => "POST /v1/chat/completions ",
        Wire::Responses => "POST /v1/responses ",
    };
    if !request_line.starts_with(expected) {
        stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await?;
        return Ok(None);
    }
    let request: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("the model request body is not JSON ({e}); is it compressed?"))?;
    counters
        .requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let reply = brain(&request);
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        )
        .await?;
    stream.flush().await?;
    let times = match (wire, reply) {
        (Wire::ChatCompletions, Reply::Deltas(shape)) => {
            Some((String::new(), stream_deltas(&mut stream, shape, "").await?))
        }
        (Wire::ChatCompletions, Reply::TaggedDeltas(shape, tag)) => {
            let times = stream_deltas(&mut stream, shape, &format!("{tag}:")).await?;
            Some((tag, times))
        }
        (Wire::ChatCompletions, Reply::Flood(flood)) => {
            // tandem hangs up once a cap is reached: a failed write is the expected end here,
            // not a mock failure.
            let _ = stream_flood(&mut stream, &flood, &counters.flooded).await;
            return Ok(None);
        }
        (Wire::ChatCompletions, reply) => {
            stream.write_all(chat_events(&reply).as_bytes()).await?;
            None
        }
        (Wire::Responses, reply) => {
            stream
                .write_all(responses_events(&reply).as_bytes())
                .await?;
            None
        }
    };
    stream.flush().await?;
    stream.shutdown().await?;
    Ok(times)
}

/// Reads the whole request (headers and body), so closing the socket later cannot reset it
/// with unread data; returns the request line and the body.
async fn read_request(stream: &mut TcpStream) -> Result<(String, Vec<u8>)> {
    let mut buffer = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(at) = find(&buffer, b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err("client closed the connection mid-request".into());
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        return Err("the mock reads only Content-Length bodies, not chunked ones".into());
    }
    if let Some(encoding) = header("content-encoding") {
        return Err(format!("the mock cannot read a `{encoding}` request body").into());
    }
    let content_length: usize = header("content-length")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(0);
    while buffer.len() - header_end < content_length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err("client closed the connection mid-body".into());
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let request_line = head.lines().next().unwrap_or_default().to_owned();
    Ok((request_line, buffer.split_off(header_end)))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// Chat completions

fn delta_event(prefix: &str, n: usize) -> String {
    format!(
        "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{prefix}{n} \"}},\"finish_reason\":null}}]}}\n\n"
    )
}

const FINISH_EVENTS: &str = "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

async fn stream_deltas(
    stream: &mut TcpStream,
    shape: StreamShape,
    prefix: &str,
) -> Result<Vec<Instant>> {
    let mut interval = shape.pace.map(|pace| {
        let mut interval = tokio::time::interval(pace);
        // If the mock falls behind it keeps the spacing instead of bursting to catch up: a burst
        // would measure queueing in tandem, not per-delta latency.
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        interval
    });
    let mut times = Vec::with_capacity(shape.deltas);
    for n in 0..shape.deltas {
        if let Some(interval) = &mut interval {
            interval.tick().await;
        }
        let event = delta_event(prefix, n);
        stream.write_all(event.as_bytes()).await?;
        stream.flush().await?;
        times.push(Instant::now());
    }
    stream.write_all(FINISH_EVENTS.as_bytes()).await?;
    stream.flush().await?;
    Ok(times)
}

/// Streams a flood as chat-completion chunks, then the finish and `[DONE]` if tandem is still
/// reading by then. Each event is built once and written many times, so the mock itself stays
/// small whatever the size of the flood. `flooded` counts the payload bytes (text or argument
/// characters) of the pieces written, so a benchmark can say how much got out before the cut.
async fn stream_flood(
    stream: &mut TcpStream,
    flood: &Flood,
    flooded: &std::sync::atomic::AtomicUsize,
) -> Result<()> {
    let (first, repeated, total, piece, finish) = match flood {
        Flood::Text { bytes, piece } => (
            chat_chunk(json!({"role": "assistant", "content": ""}), None),
            chat_chunk(json!({"content": "a".repeat(*piece)}), None),
            *bytes,
            *piece,
            "stop",
        ),
        Flood::ToolArguments {
            id,
            name,
            path,
            bytes,
            piece,
        } => (
            chat_chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id,
                    "type": "function", "function": {"name": name,
                    "arguments": format!("{{\"path\":\"{path}\",\"content\":\"")}}]}),
                None,
            ),
            chat_chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "a".repeat(*piece)}}]}),
                None,
            ),
            *bytes,
            *piece,
            "tool_calls",
        ),
    };
    stream.write_all(first.as_bytes()).await?;
    for _ in 0..total.div_ceil(piece.max(1)) {
        stream.write_all(repeated.as_bytes()).await?;
        flooded.fetch_add(piece, std::sync::atomic::Ordering::Relaxed);
    }
    if let Flood::ToolArguments { .. } = flood {
        stream
            .write_all(
                chat_chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"}"}}]}),
                    None,
                )
                .as_bytes(),
            )
            .await?;
    }
    stream
        .write_all(chat_chunk(json!({}), Some(finish)).as_bytes())
        .await?;
    stream.write_all(b"data: [DONE]\n\n").await?;
    stream.flush().await?;
    stream.shutdown().await?;
    Ok(())
}

fn chat_chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

/// A whole scripted reply as chat-completion chunks, usage and `[DONE]`.
fn chat_events(reply: &Reply) -> String {
    let mut out = chat_chunk(json!({"role": "assistant", "content": ""}), None);
    let finish = match reply {
        Reply::Text(text) => {
            out.push_str(&chat_chunk(json!({"content": text}), None));
            "stop"
        }
        Reply::ToolCalls(calls) => {
            for (index, (id, name, arguments)) in calls.iter().enumerate() {
                out.push_str(&chat_chunk(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": arguments}}]}),
                    None,
                ));
            }
            "tool_calls"
        }
        Reply::Deltas(_) | Reply::TaggedDeltas(..) | Reply::Flood(_) => {
            unreachable!("delta streams and floods are written by stream_deltas and stream_flood")
        }
    };
    out.push_str(&chat_chunk(json!({}), Some(finish)));
    let usage = json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    out.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    out
}

/// How many tool results the chat-completions request carries after its last user message:
/// the step of a scripted turn the model is at.
pub fn chat_tool_results(request: &Value) -> usize {
    let messages = request["messages"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    messages
        .iter()
        .rev()
        .take_while(|m| m["role"] != "user")
        .filter(|m| m["role"] == "tool")
        .count()
}

// ---------------------------------------------------------------------------------------------
// Responses API

fn responses_event(event: Value) -> String {
    let kind = event["type"].as_str().unwrap_or_default().to_owned();
    format!("event: {kind}\ndata: {event}\n\n")
}

/// A whole scripted reply as Responses API events: `response.created`, the output items (with
/// text deltas for a message), `response.completed` with usage.
fn responses_events(reply: &Reply) -> String {
    let mut out =
        responses_event(json!({"type": "response.created", "response": {"id": "resp_bench"}}));
    match reply {
        Reply::Text(text) => {
            let empty =
                json!({"type": "message", "id": "msg_bench", "role": "assistant", "content": []});
            out.push_str(&responses_event(
                json!({"type": "response.output_item.added", "output_index": 0, "item": empty}),
            ));
            out.push_str(&responses_event(
                json!({"type": "response.output_text.delta", "item_id": "msg_bench",
                "output_index": 0, "content_index": 0, "delta": text}),
            ));
            let done = json!({"type": "message", "id": "msg_bench", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]});
            out.push_str(&responses_event(
                json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
            ));
        }
        Reply::ToolCalls(calls) => {
            for (index, (id, name, arguments)) in calls.iter().enumerate() {
                let item = json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id,
                    "name": name, "arguments": arguments});
                out.push_str(&responses_event(json!({"type": "response.output_item.added", "output_index": index, "item": item})));
                out.push_str(&responses_event(json!({"type": "response.output_item.done", "output_index": index, "item": item})));
            }
        }
        Reply::Deltas(_) | Reply::TaggedDeltas(..) | Reply::Flood(_) => {
            unreachable!("the Responses mock serves scripted turns only")
        }
    }
    out.push_str(&responses_event(json!({"type": "response.completed", "response": {"id": "resp_bench",
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}})));
    out
}

/// How many `function_call_output` items the Responses request carries after its last user
/// message.
pub fn responses_tool_results(request: &Value) -> usize {
    let input = request["input"].as_array().map_or(&[][..], Vec::as_slice);
    input
        .iter()
        .rev()
        .take_while(|item| !(item["type"] == "message" && item["role"] == "user"))
        .filter(|item| item["type"] == "function_call_output")
        .count()
}

/// The text of the first tool result in a chat-completions or Responses request, for checking
/// that the scripted command really ran.
pub fn first_tool_output(request: &Value) -> Option<String> {
    if let Some(messages) = request["messages"].as_array() {
        return messages
            .iter()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].to_string());
    }
    request["input"].as_array().and_then(|input| {
        input
            .iter()
            .find(|item| item["type"] == "function_call_output")
            .map(|item| item["output"].to_string())
    })
}
