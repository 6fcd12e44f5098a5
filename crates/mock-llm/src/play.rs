//! Playing a script on one connection: each rendered chunk written and flushed on its own, pauses
//! and gates honoured, and the read side watched so a client hanging up is noticed even while
//! the stream is paused.
//!
//! Two steps have their own write loops because the benchmarks measure through them: numbered
//! deltas (`Step::Deltas`) are formatted from a template rendered once and written with no more
//! per-chunk work than a `format!`, a write, a flush and an `Instant::now()`; repeated pieces
//! (`Step::Repeat`) are rendered once and written many times, so a 300 MB flood costs the mock
//! no memory.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::MissedTickBehavior;

use crate::http::{write_flush, write_plain};
use crate::render::Renderer;
use crate::script::{Deltas, Dialect, Script, Step};

/// How a played script ended.
pub(crate) enum Outcome {
    /// Every step was written. `sent` holds the write instants of its numbered deltas.
    Finished { sent: Vec<Instant> },
    /// The client closed the connection (or a write failed) before the end.
    Cancelled,
    /// The script asked for a reset (`Step::Disconnect`).
    Disconnect,
}

/// Marks where a numbered delta's text goes in the rendered template: plain ASCII that no JSON
/// encoder escapes, and that no script text contains.
const DELTA_PLACEHOLDER: &str = "@@tandem-mock-delta@@";

/// What a script needs from the server while it plays.
pub(crate) struct PlayContext<'a> {
    pub(crate) dialect: Dialect,
    pub(crate) model: &'a str,
    /// The request's 0-based index.
    pub(crate) index: usize,
    /// Payload bytes written by `Step::Repeat` (all connections).
    pub(crate) repeated_payload_bytes: &'a AtomicUsize,
}

/// Plays a script on the connection, watching the read side for the client hanging up.
pub(crate) async fn play(
    stream: &mut TcpStream,
    script: &Script,
    context: &PlayContext<'_>,
) -> Outcome {
    let (mut rd, mut wr) = stream.split();
    // The request was read completely, so any further read ending means the client closed
    // (or reset) the connection: that is how a cancelled stream is detected while paused.
    let closed = async move {
        let mut buf = [0u8; 512];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    };
    tokio::pin!(closed);

    if let Some(gate) = &script.head_gate {
        gate.mark_reached();
        tokio::select! {
            biased;
            _ = &mut closed => return Outcome::Cancelled,
            _ = gate.wait_open() => {}
        }
    }

    let plain = match script.steps.first() {
        Some(Step::HttpError {
            status,
            body,
            retry_after,
        }) => Some((*status, "application/json", body, *retry_after)),
        Some(Step::Plain {
            status,
            content_type,
            body,
        }) => Some((*status, content_type.as_str(), body, None)),
        _ => None,
    };
    if let Some((status, content_type, body, retry_after)) = plain {
        return match write_plain(&mut wr, status, content_type, body, retry_after).await {
            Ok(()) => Outcome::Finished { sent: Vec::new() },
            Err(_) => Outcome::Cancelled,
        };
    }

    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    let mut pieces: Vec<String> = vec![head.to_string()];
    let mut renderer = Renderer::new(context.dialect, script, context.model, context.index);
    renderer.start(&mut pieces);
    let mut sent = Vec::new();

    for step in &script.steps {
        // What to write for this step, or a pause / a disconnect.
        match step {
            Step::Raw(s) => pieces.push(s.clone()),
            // A script that puts them elsewhere than first was refused when it was queued.
            Step::HttpError { .. } | Step::Plain { .. } => {}
            Step::Delay(_) | Step::WaitFor(_) | Step::Disconnect => {}
            Step::Deltas(_) | Step::Repeat { .. } => {}
            other => renderer.step(other, context.index, &mut pieces),
        }

        // Each chunk is written and flushed on its own so the client sees real chunk
        // boundaries; `biased` makes a hang-up win over further writing.
        for piece in pieces.drain(..) {
            tokio::select! {
                biased;
                _ = &mut closed => return Outcome::Cancelled,
                r = write_flush(&mut wr, piece.as_bytes()) => {
                    if r.is_err() {
                        return Outcome::Cancelled;
                    }
                }
            }
        }

        match step {
            Step::Delay(d) => {
                tokio::select! {
                    biased;
                    _ = &mut closed => return Outcome::Cancelled,
                    _ = tokio::time::sleep(*d) => {}
                }
            }
            Step::WaitFor(gate) => {
                gate.mark_reached();
                tokio::select! {
                    biased;
                    _ = &mut closed => return Outcome::Cancelled,
                    _ = gate.wait_open() => {}
                }
            }
            Step::Disconnect => return Outcome::Disconnect,
            Step::Deltas(deltas) => {
                let (lead, before, after) =
                    template(&mut renderer, context.index, deltas.tag.as_deref());
                for piece in lead {
                    if write_flush(&mut wr, piece.as_bytes()).await.is_err() {
                        return Outcome::Cancelled;
                    }
                }
                if write_deltas(&mut wr, &mut closed, deltas, &before, &after, &mut sent)
                    .await
                    .is_err()
                {
                    return Outcome::Cancelled;
                }
            }
            Step::Repeat { step: inner, times }
                if write_repeated(&mut wr, &mut renderer, context, inner, *times)
                    .await
                    .is_err() =>
            {
                return Outcome::Cancelled;
            }
            _ => {}
        }
    }
    // A script with no steps still sends its head.
    for piece in pieces.drain(..) {
        if write_flush(&mut wr, piece.as_bytes()).await.is_err() {
            return Outcome::Cancelled;
        }
    }
    Outcome::Finished { sent }
}

/// Renders one text step with a placeholder and cuts it there: the pieces to write first (an
/// Anthropic block start, a Responses message item), and the text around each delta's number.
fn template(
    renderer: &mut Renderer,
    index: usize,
    tag: Option<&str>,
) -> (Vec<String>, String, String) {
    let mut pieces = Vec::new();
    renderer.step(
        &Step::Text(DELTA_PLACEHOLDER.to_owned()),
        index,
        &mut pieces,
    );
    if let Renderer::Responses(state) = renderer {
        state.forget_text(DELTA_PLACEHOLDER.len());
    }
    let last = pieces.pop().unwrap_or_default();
    let (before, after) = last
        .split_once(DELTA_PLACEHOLDER)
        .unwrap_or((last.as_str(), ""));
    // The tag goes inside a JSON string: escape it once here, not per delta.
    let tag = tag
        .map(|t| {
            let quoted = serde_json::Value::String(format!("{t}:")).to_string();
            quoted[1..quoted.len() - 1].to_owned()
        })
        .unwrap_or_default();
    (pieces, format!("{before}{tag}"), after.to_owned())
}

/// The numbered deltas' write loop: per delta one `format!`, one write, one flush and one
/// `Instant::now()` (pushed into a vector sized up front), the same work the benchmarks' own
/// mock did, so their latency figures keep their meaning. The read side is watched only while
/// waiting for the next tick; a hang-up between unpaced writes shows up as a failed write.
async fn write_deltas<W, C>(
    wr: &mut W,
    closed: &mut std::pin::Pin<&mut C>,
    deltas: &Deltas,
    before: &str,
    after: &str,
    sent: &mut Vec<Instant>,
) -> std::io::Result<()>
where
    W: AsyncWriteExt + Unpin,
    C: std::future::Future<Output = ()>,
{
    let mut interval = deltas.pace.map(|pace| {
        let mut interval = tokio::time::interval(pace);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        interval
    });
    sent.reserve(deltas.count);
    for n in 0..deltas.count {
        if let Some(interval) = &mut interval {
            tokio::select! {
                biased;
                _ = closed.as_mut() => return Err(std::io::ErrorKind::ConnectionAborted.into()),
                _ = interval.tick() => {}
            }
        }
        let event = format!("{before}{n} {after}");
        wr.write_all(event.as_bytes()).await?;
        wr.flush().await?;
        sent.push(Instant::now());
    }
    Ok(())
}

/// Writes a `Repeat` step: the inner step rendered once, its last piece written `times` times
/// (the pieces before it, such as an Anthropic block start, once), counting payload bytes.
async fn write_repeated<W: AsyncWriteExt + Unpin>(
    wr: &mut W,
    renderer: &mut Renderer,
    context: &PlayContext<'_>,
    inner: &Step,
    times: usize,
) -> std::io::Result<()> {
    let payload = match inner {
        Step::Text(t) => t.len(),
        Step::ToolArguments { json_piece, .. } => json_piece.len(),
        // Refused when the script was queued.
        _ => return Ok(()),
    };
    let mut pieces = Vec::new();
    renderer.step(inner, context.index, &mut pieces);
    let Some(repeated) = pieces.pop() else {
        return Ok(());
    };
    for piece in pieces {
        wr.write_all(piece.as_bytes()).await?;
    }
    for _ in 0..times {
        wr.write_all(repeated.as_bytes()).await?;
        context
            .repeated_payload_bytes
            .fetch_add(payload, Ordering::Relaxed);
    }
    wr.flush().await
}
