//! The mock's hand-written HTTP/1.1: reading one request (Content-Length or chunked body),
//! writing a plain (non-streaming) answer, and routing a request path to a vendor dialect or to
//! the control endpoints under `/_mock/`.
//!
//! One request per connection, `Connection: close`: the end of a stream is then unambiguous and
//! the tests control every byte of it.

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use crate::script::Dialect;

/// A parsed HTTP request head plus body.
pub(crate) struct HttpRequest {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

pub(crate) async fn read_request<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
) -> std::io::Result<HttpRequest> {
    use std::io::{Error, ErrorKind};
    let bad = |m: String| Error::new(ErrorKind::InvalidData, m);

    let mut line = String::new();
    if r.read_line(&mut line).await? == 0 {
        return Err(Error::new(ErrorKind::UnexpectedEof, "no request line"));
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();

    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Err(bad("eof in headers".into()));
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };

    let mut body = Vec::new();
    let chunked = header("transfer-encoding")
        .map(|v| v.to_ascii_lowercase().contains("chunked"))
        .unwrap_or(false);
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).await?;
            let size_text = line.trim().split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| bad(format!("bad chunk size line {line:?}")))?;
            if size == 0 {
                // Trailers, then the final empty line.
                loop {
                    line.clear();
                    if r.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..]).await?;
            line.clear();
            r.read_line(&mut line).await?; // the CRLF after the chunk data
        }
    } else if let Some(len) = header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        body.resize(len, 0);
        r.read_exact(&mut body).await?;
    }
    Ok(HttpRequest {
        method,
        path,
        headers,
        body,
    })
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

pub(crate) async fn write_plain<W: AsyncWrite + Unpin>(
    w: &mut W,
    status: u16,
    content_type: &str,
    body: &str,
    retry_after: Option<u32>,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason_phrase(status),
        body.len()
    );
    if let Some(secs) = retry_after {
        head.push_str(&format!("Retry-After: {secs}\r\n"));
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes()).await?;
    w.write_all(body.as_bytes()).await?;
    w.flush().await?;
    w.shutdown().await
}

/// Where a request goes.
pub(crate) enum Route {
    /// A model request in this dialect; the model for Gemini (which puts it in the path).
    Model(Dialect, Option<String>),
    /// `GET /v1/models` (answered only when the mock was told to, as the CLI does).
    ModelList,
    /// `/_mock/...`: the control endpoints (see `control.rs`); the path after the prefix.
    Control(String),
}

/// The prefix of the control endpoints; no vendor API uses it.
pub(crate) const CONTROL_PREFIX: &str = "/_mock/";

/// The route a request's method and path name, if any.
pub(crate) fn route(method: &str, path: &str) -> Option<Route> {
    if let Some(rest) = path.strip_prefix(CONTROL_PREFIX) {
        return Some(Route::Control(rest.to_owned()));
    }
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let path = path.trim_end_matches('/');
    if method == "GET" && path == "/v1/models" {
        return Some(Route::ModelList);
    }
    if method != "POST" {
        return None;
    }
    match path {
        "/v1/chat/completions" => Some(Route::Model(Dialect::OpenAi, None)),
        "/v1/messages" => Some(Route::Model(Dialect::Anthropic, None)),
        "/v1/responses" => Some(Route::Model(Dialect::Responses, None)),
        other => {
            let model = other
                .strip_prefix("/v1beta/models/")?
                .strip_suffix(":streamGenerateContent")?;
            // Without alt=sse Gemini answers one JSON array, not an event stream.
            query
                .split('&')
                .any(|kv| kv == "alt=sse")
                .then(|| Route::Model(Dialect::Gemini, Some(model.to_owned())))
        }
    }
}

/// An error body in the vendor's shape.
pub(crate) fn error_body(dialect: Dialect, status: u16, message: &str) -> String {
    match dialect {
        Dialect::OpenAi | Dialect::Responses => json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
        Dialect::Anthropic => json!({"type": "error", "error": {"type": if status == 400 { "invalid_request_error" } else { "api_error" }, "message": message}}),
        Dialect::Gemini => json!({"error": {"code": status, "message": message, "status": if status == 400 { "INVALID_ARGUMENT" } else { "INTERNAL" }}}),
    }
    .to_string()
}

/// Writes `bytes` and flushes them, so the client sees this chunk on its own.
pub(crate) async fn write_flush<W: AsyncWrite + Unpin>(
    w: &mut W,
    bytes: &[u8],
) -> std::io::Result<()> {
    w.write_all(bytes).await?;
    w.flush().await
}
