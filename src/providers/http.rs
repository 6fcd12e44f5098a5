//! HTTP plumbing the native providers share: API keys from the environment, error mapping,
//! `Retry-After`, and one SSE driver that turns a streamed response into typed chunks.
//!
//! A vendor module supplies the request and an [`SseParser`] for its event format; the driver
//! owns the connection, the end-of-stream check and the translation of transport failures.

use std::collections::VecDeque;
use std::time::Duration;

use eventsource_stream::Eventsource;
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

type Events = futures_util::stream::BoxStream<
    'static,
    Result<eventsource_stream::Event, eventsource_stream::EventStreamError<reqwest::Error>>,
>;

enum State<P> {
    // Boxed: the request builder is large and lives only until the response arrives.
    Start(Box<(reqwest::RequestBuilder, String, P)>),
    Streaming {
        events: Events,
        pending: VecDeque<Chunk>,
        parser: P,
        complete: bool,
    },
    Draining(VecDeque<Chunk>),
    Done,
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
                    if !status.is_success() {
                        let after = retry_after(response.headers());
                        let text = response.text().await.unwrap_or_default();
                        return Some((
                            Err(http_error(status.as_u16(), &text, after)),
                            State::Done,
                        ));
                    }
                    State::Streaming {
                        events: response.bytes_stream().eventsource().boxed(),
                        pending: VecDeque::new(),
                        parser,
                        complete: false,
                    }
                }
                State::Streaming {
                    mut events,
                    mut pending,
                    mut parser,
                    complete,
                } => {
                    if let Some(chunk) = pending.pop_front() {
                        return Some((
                            Ok(chunk),
                            State::Streaming {
                                events,
                                pending,
                                parser,
                                complete,
                            },
                        ));
                    }
                    if complete {
                        return None;
                    }
                    let mut out = Vec::new();
                    match events.next().await {
                        None => match parser.end_of_body(&mut out) {
                            Ok(()) => State::Draining(out.into()),
                            Err(error) => return Some((Err(error), State::Done)),
                        },
                        Some(Err(e)) => {
                            let error =
                                ProviderError::new(format!("the provider stream broke: {e}"), true);
                            return Some((Err(error), State::Done));
                        }
                        Some(Ok(event)) => {
                            let data = event.data.trim();
                            let progress = if data.is_empty() {
                                Ok(Progress::More)
                            } else {
                                parser.event(&event.event, data, &mut out)
                            };
                            match progress {
                                Ok(progress) => {
                                    pending.extend(out);
                                    State::Streaming {
                                        events,
                                        pending,
                                        parser,
                                        complete: progress == Progress::Complete,
                                    }
                                }
                                Err(error) => {
                                    // Chunks parsed before the error are dropped with the
                                    // attempt; the engine retries from a clean request.
                                    return Some((Err(error), State::Done));
                                }
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
                "the provider sent an event that is not JSON ({e}): {}",
                data.chars().take(200).collect::<String>()
            ),
            true,
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
