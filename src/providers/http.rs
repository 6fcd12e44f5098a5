//! HTTP plumbing the native providers share: API keys from the environment, error mapping,
//! `Retry-After`, and one SSE driver that turns a streamed response into typed chunks.
//!
//! A vendor module supplies the request and an [`SseParser`] for its event format; the driver
//! owns the connection, the end-of-stream check and the translation of transport failures.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use super::{Chunk, ChunkStream, ProviderError};

/// A missing API key: the message names the variable, never a value.
#[derive(Debug, thiserror::Error)]
#[error("the environment variable {var} (named by api_key_env) is not set or is empty; export it with the provider's API key and retry")]
pub struct MissingKey {
    pub var: String,
}

/// The API key from the environment variable the config names.
pub fn api_key(var: &str) -> Result<String, MissingKey> {
    match std::env::var(var) {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_owned()),
        _ => Err(MissingKey {
            var: var.to_owned(),
        }),
    }
}

/// The key a request must carry: `None` when the config names no variable, an error (not
/// retriable: retrying cannot set the variable) when it names one that is unset or empty.
pub fn configured_key(api_key_env: Option<&str>) -> Result<Option<String>, ProviderError> {
    api_key_env
        .map(api_key)
        .transpose()
        .map_err(|missing| ProviderError::new(missing.to_string(), false))
}

/// A stream that fails at once with `error`.
pub fn failed(error: ProviderError) -> ChunkStream {
    futures_util::stream::once(async move { Err(error) }).boxed()
}

/// The shared reqwest client settings of every provider.
pub fn build_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// A POST with a JSON body written from shared pieces (see `wire::Body`), with its exact
/// length.
pub fn post_json(
    builder: reqwest::RequestBuilder,
    body: super::wire::Body,
) -> reqwest::RequestBuilder {
    let (body, len) = body.into_http();
    builder
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::CONTENT_LENGTH, len)
        .body(body)
}

/// `Retry-After` in seconds (the HTTP-date form is rare for APIs and is ignored).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Map a non-success HTTP answer. OpenAI, Anthropic and Gemini all put the text in
/// `error.message`; anything else is shown as its first 500 characters.
pub fn http_error(code: u16, body: &str, retry_after: Option<Duration>) -> ProviderError {
    let detail = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("error")
                .and_then(|e| e.get("message").or(Some(e)))
                .map(|m| match m {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
        })
        .unwrap_or_else(|| body.chars().take(500).collect());
    let context_overflow = (code == 400 || code == 413) && super::looks_like_context_overflow(body);
    // 529 is Anthropic's "overloaded"; it is covered by the 5xx rule.
    let retriable = code == 429 || code >= 500;
    let bad_key = body.contains("API key not valid") || body.contains("API_KEY_INVALID");
    let hint = match code {
        _ if context_overflow => "; the conversation is longer than the model's context window",
        401 | 403 => "; check the API key in the environment variable named by api_key_env",
        400 if bad_key => "; check the API key in the environment variable named by api_key_env",
        404 => "; check base_url and the model name",
        429 => "; the provider is rate limiting",
        529 => "; the provider is overloaded",
        _ if code >= 500 => "; the provider failed",
        _ => "",
    };
    ProviderError {
        message: format!("provider answered HTTP {code}: {detail}{hint}"),
        retriable,
        status: Some(code),
        retry_after,
        context_overflow,
    }
}

/// What a vendor's event parser says about the stream after one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    More,
    /// The vendor's end marker arrived; nothing after it is read.
    Complete,
}

/// One vendor's SSE event format.
pub trait SseParser: Send + 'static {
    /// Parse one event (`event` is the SSE event name, often empty), appending chunks to `out`.
    fn event(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<Chunk>,
    ) -> Result<Progress, ProviderError>;
    /// The body ended without an end marker: either finish (a format without one) or fail.
    fn end_of_body(&mut self, out: &mut Vec<Chunk>) -> Result<(), ProviderError>;
}

/// The error for a body that ended before the vendor said it was complete.
pub fn cut_short() -> ProviderError {
    ProviderError::new("the provider closed the stream before it finished", true)
}

/// The most bytes one event of a stream may hold (its `data:` lines, up to the blank line that
/// ends it). The SSE parser buffers an event until it is complete, so without a cap a body with
/// no event boundary (200 MB on one line) would be held in memory whole.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One server-sent event: its `event:` name (often empty) and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SseEvent {
    event: String,
    data: String,
}

/// An incremental server-sent-events decoder (the WHATWG event-stream format): bytes in,
/// complete events out, each byte looked at once.
///
/// Written here rather than taken from `eventsource-stream` (which the benchmarks still use as
/// the floor): that crate appends each chunk to its buffer and parses the whole buffer again, so
/// an event that arrives in N pieces costs O(N²): a hostile 17 MiB line kept a debug build busy
/// for more than 10 s (the test's limit) before any cap could be checked. This decoder also refuses
/// an event over [`MAX_EVENT_BYTES`] as soon as it gets there, instead of buffering it.
#[derive(Debug, Default)]
struct SseDecoder {
    line: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
    /// The last byte was `\r`: a `\n` right after it ends the same line.
    after_cr: bool,
    /// Bytes of the event being received.
    in_event: usize,
    /// The first bytes of the body were seen (a UTF-8 byte order mark there is skipped).
    started: bool,
}

/// An event over the cap, or one that is not UTF-8.
#[derive(Debug, thiserror::Error)]
enum SseError {
    #[error("the provider sent an event larger than {} MiB (the cap on one event); check base_url, the server does not speak this API's event stream", MAX_EVENT_BYTES / (1024 * 1024))]
    EventTooLarge,
    #[error("the provider sent an event that is not UTF-8 text; check base_url")]
    NotUtf8,
}

impl SseDecoder {
    fn push(&mut self, mut bytes: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), SseError> {
        if !self.started {
            self.started = true;
            bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        }
        for &byte in bytes {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    self.after_cr = byte == b'\r';
                    self.end_line(out)?;
                }
                _ => {
                    self.in_event += 1;
                    if self.in_event > MAX_EVENT_BYTES {
                        return Err(SseError::EventTooLarge);
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut VecDeque<SseEvent>) -> Result<(), SseError> {
        if self.line.is_empty() {
            // A blank line dispatches the event; one without data is dropped, as the spec says.
            if std::mem::take(&mut self.has_data) {
                out.push_back(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            } else {
                self.event.clear();
            }
            self.in_event = 0;
            return Ok(());
        }
        let line = std::str::from_utf8(&self.line).map_err(|_| SseError::NotUtf8)?;
        if !line.starts_with(':') {
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "data" => {
                    if self.has_data {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                    self.has_data = true;
                }
                "event" => value.clone_into(&mut self.event),
                // `id` and `retry` steer reconnection, which tandem does by retrying the request.
                _ => {}
            }
        }
        self.line.clear();
        Ok(())
    }
}

type Body = futures_util::stream::BoxStream<'static, Result<bytes::Bytes, reqwest::Error>>;

/// The error for a success answer that is not an event stream: a proxy's or a login page's
/// HTML, or a JSON answer to a streaming request. Retrying would get the same, so it is not
/// retriable, and it shows what came back.
async fn not_a_stream(
    status: reqwest::StatusCode,
    content_type: &str,
    mut response: reqwest::Response,
) -> ProviderError {
    let mut head: Vec<u8> = Vec::new();
    while head.len() < 300 {
        match response.chunk().await {
            Ok(Some(bytes)) => head.extend_from_slice(&bytes),
            _ => break,
        }
    }
    head.truncate(300);
    let text = String::from_utf8_lossy(&head);
    ProviderError::new(
        format!(
            "the provider answered HTTP {} with content type `{content_type}`, not an event stream; the body begins: {:?}; check base_url (the API's base URL, such as https://api.openai.com/v1) and that the server streams",
            status.as_u16(),
            text.trim()
        ),
        false,
    )
}

enum State<P> {
    // Boxed: the request builder is large and lives only until the response arrives.
    Start(Box<(reqwest::RequestBuilder, String, P)>),
    Streaming(Box<Streaming<P>>),
    Draining(VecDeque<Chunk>),
    Done,
}

/// A response being read: the body, the events decoded from it and not parsed yet, the chunks
/// parsed and not handed out yet.
struct Streaming<P> {
    body: Body,
    decoder: SseDecoder,
    events: VecDeque<SseEvent>,
    pending: VecDeque<Chunk>,
    parser: P,
    complete: bool,
}

/// Send `request` and stream its SSE body through `parser`.
pub fn stream_sse<P: SseParser>(
    request: reqwest::RequestBuilder,
    url: String,
    parser: P,
) -> ChunkStream {
    let start = State::Start(Box::new((request, url, parser)));
    futures_util::stream::unfold(start, |mut state| async move {
        loop {
            state = match state {
                State::Done => return None,
                State::Draining(mut pending) => {
                    let chunk = pending.pop_front()?;
                    return Some((Ok(chunk), State::Draining(pending)));
                }
                State::Start(start) => {
                    let (request, url, parser) = *start;
                    let response = match request.send().await {
                        Ok(r) => r,
                        Err(e) => {
                            let message = format!(
                                "cannot reach the provider at {url}: {e}; check that it is running and base_url is right"
                            );
                            return Some((Err(ProviderError::new(message, true)), State::Done));
                        }
                    };
                    let status = response.status();
                    if status.is_redirection() {
                        // The body is streamed from shared pieces, so the client cannot send it
                        // again to another address; and a base URL that redirects every request
                        // is better fixed once.
                        let to = response
                            .headers()
                            .get(reqwest::header::LOCATION)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("(no Location header)")
                            .to_owned();
                        let message = format!(
                            "the provider at {url} answered HTTP {} redirecting to {to}; set base_url to the address it redirects to",
                            status.as_u16()
                        );
                        return Some((Err(ProviderError::new(message, false)), State::Done));
                    }
                    if !status.is_success() {
                        let after = retry_after(response.headers());
                        let text = response.text().await.unwrap_or_default();
                        return Some((
                            Err(http_error(status.as_u16(), &text, after)),
                            State::Done,
                        ));
                    }
                    let content_type = response
                        .headers()
                        .get(reqwest::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    // A missing type is tolerated (some local servers send none); a wrong one
                    // is not.
                    if !content_type.is_empty()
                        && !content_type
                            .to_ascii_lowercase()
                            .starts_with("text/event-stream")
                    {
                        let error = not_a_stream(status, &content_type, response).await;
                        return Some((Err(error), State::Done));
                    }
                    State::Streaming(Box::new(Streaming {
                        body: response.bytes_stream().boxed(),
                        decoder: SseDecoder::default(),
                        events: VecDeque::new(),
                        pending: VecDeque::new(),
                        parser,
                        complete: false,
                    }))
                }
                State::Streaming(mut stream) => {
                    if let Some(chunk) = stream.pending.pop_front() {
                        return Some((Ok(chunk), State::Streaming(stream)));
                    }
                    if stream.complete {
                        return None;
                    }
                    let mut out = Vec::new();
                    if let Some(event) = stream.events.pop_front() {
                        let data = event.data.trim();
                        let progress = if data.is_empty() {
                            Ok(Progress::More)
                        } else {
                            stream.parser.event(&event.event, data, &mut out)
                        };
                        match progress {
                            Ok(progress) => {
                                stream.pending.extend(out);
                                stream.complete = progress == Progress::Complete;
                                State::Streaming(stream)
                            }
                            // Chunks parsed before the error are dropped with the attempt;
                            // the engine retries from a clean request.
                            Err(error) => return Some((Err(error), State::Done)),
                        }
                    } else {
                        match stream.body.next().await {
                            None => match stream.parser.end_of_body(&mut out) {
                                Ok(()) => State::Draining(out.into()),
                                Err(error) => return Some((Err(error), State::Done)),
                            },
                            Some(Err(e)) => {
                                let error = ProviderError::new(
                                    format!("the provider stream broke: {e}"),
                                    true,
                                );
                                return Some((Err(error), State::Done));
                            }
                            Some(Ok(bytes)) => {
                                let Streaming {
                                    decoder, events, ..
                                } = &mut *stream;
                                if let Err(e) = decoder.push(&bytes, events) {
                                    // Retrying would get the same body.
                                    return Some((
                                        Err(ProviderError::new(e.to_string(), false)),
                                        State::Done,
                                    ));
                                }
                                State::Streaming(stream)
                            }
                        }
                    }
                }
            };
        }
    })
    .boxed()
}

/// Parse an event's data as JSON, or explain what came instead.
pub fn json_event(data: &str) -> Result<Value, ProviderError> {
    serde_json::from_str(data).map_err(|e| {
        ProviderError::new(
            format!(
                "the provider sent an event that is not JSON ({e}): {}; check base_url, the server does not speak this API",
                data.chars().take(200).collect::<String>()
            ),
            // The same server answers the same way again: retrying only delays the error.
            false,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_classify_for_every_vendor_body() {
        let e = http_error(401, r#"{"error":{"message":"bad key"}}"#, None);
        assert!(!e.retriable);
        assert!(e.message.contains("bad key") && e.message.contains("api_key_env"));
        let e = http_error(503, "down", None);
        assert!(e.retriable);
        let e = http_error(
            400,
            r#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 10 tokens"}}"#,
            None,
        );
        assert!(e.context_overflow && !e.retriable);
        let e = http_error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            Some(Duration::from_secs(2)),
        );
        assert!(
            e.retriable && e.message.contains("Overloaded") && e.message.contains("overloaded")
        );
        assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
        let e = http_error(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            None,
        );
        assert!(e.context_overflow && !e.retriable);
        let e = http_error(
            400,
            r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
            None,
        );
        assert!(e.context_overflow && !e.retriable);
        let e = http_error(
            400,
            r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#,
            None,
        );
        assert!(!e.retriable && e.message.contains("api_key_env"));
        let e = http_error(
            403,
            r#"{"type":"error","error":{"type":"permission_error","message":"no"}}"#,
            None,
        );
        assert!(!e.retriable);
    }

    #[test]
    fn missing_key_names_the_variable() {
        let err = api_key("TANDEM_TEST_SURELY_UNSET_KEY_VAR").unwrap_err();
        assert!(err.to_string().contains("TANDEM_TEST_SURELY_UNSET_KEY_VAR"));
    }
}

#[cfg(test)]
mod sse_tests {
    use super::*;

    fn decode(pieces: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut decoder = SseDecoder::default();
        let mut out = VecDeque::new();
        for piece in pieces {
            decoder.push(piece, &mut out)?;
        }
        Ok(out.into())
    }

    fn event(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_are_the_same_however_the_body_is_cut() {
        let body: &[u8] = b"\xef\xbb\xbf: a comment\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata:first\ndata: second\n\nevent: ping\n\nid: 7\rdata: cr\r\r";
        let expected = vec![
            event("message_start", "{\"a\":1}"),
            event("", "first\nsecond"),
            event("", "cr"),
        ];
        assert_eq!(decode(&[body]).unwrap(), expected);
        // One byte at a time (a `\r\n` split across two chunks is one line end).
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(decode(&bytes).unwrap(), expected);
        // An unfinished event is not delivered.
        assert_eq!(decode(&[b"data: partial\n"]).unwrap(), Vec::new());
    }

    #[test]
    fn an_event_over_the_cap_is_refused_when_it_gets_there() {
        let line = vec![b'x'; MAX_EVENT_BYTES];
        let mut decoder = SseDecoder::default();
        let mut out = VecDeque::new();
        decoder.push(b"data: ", &mut out).unwrap();
        assert!(matches!(
            decoder.push(&line, &mut out),
            Err(SseError::EventTooLarge)
        ));
        // Many short lines of one event count together.
        let mut decoder = SseDecoder::default();
        let lines = b"data: 0123456789abcdef\n".repeat(MAX_EVENT_BYTES / 20);
        assert!(matches!(
            decoder.push(&lines, &mut out),
            Err(SseError::EventTooLarge)
        ));
        // Events under the cap reset the count.
        let mut decoder = SseDecoder::default();
        let small = b"data: 0123456789abcdef\n\n".repeat(MAX_EVENT_BYTES / 20);
        assert!(decoder.push(&small, &mut out).is_ok());
    }
}
