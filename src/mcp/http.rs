//! The streamable HTTP transport of MCP servers, over tandem's own reqwest 0.12.
//!
//! rmcp's built-in HTTP client wants reqwest 0.13; tandem keeps one HTTP stack, so this module
//! implements rmcp's [`StreamableHttpClient`] for [`McpHttpClient`], and [`transport`] makes the
//! transport the engine passes to `rmcp::serve_client`; [`cause`] finds this module's error
//! behind rmcp's wrappers. What the wire looks like (MCP "Streamable HTTP"):
//! every client message is a POST accepting `application/json, text/event-stream`; the server
//! answers 202 to notifications and responses, and a request with one JSON body or an SSE
//! stream; the session lives in `Mcp-Session-Id` (404 with it means the session expired, which
//! rmcp recovers from by initializing again); a GET opens the server's own SSE stream (405 when
//! the server offers none); DELETE ends the session.
//!
//! Memory stays bounded whatever the server sends: JSON bodies and SSE events are counted
//! before they are kept and refused past rmcp's configured limits, error bodies are read only
//! as a short prefix, and comment lines of an SSE stream (keep-alives) are dropped unbuffered.
//! Errors name the cause and the next step, and never show the token, header values or the
//! URL's query (either may hold a secret). A server that speaks only the deprecated HTTP+SSE
//! transport is recognised at the initialize POST and refused by name.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, BoxStream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::StatusCode;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::transport::StreamableHttpClientTransport;
use sse_stream::Sse;

mod error;
mod sse;

pub use error::{cause, McpHttpError};
use sse::sse_events;

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// Headers the transport sets itself (or rmcp's worker does, such as `MCP-Protocol-Version` and
/// the `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*` standard headers); a configured header of the same
/// name would contradict them.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    SESSION_ID,
    "mcp-protocol-version",
    LAST_EVENT_ID,
    "mcp-method",
    "mcp-name",
];
const RESERVED_HEADER_PREFIX: &str = "mcp-param-";

/// The largest JSON body or SSE event kept from a server: tool results carry base64 images, and
/// tandem caps what the model sees afterwards; anything larger is refused, not truncated.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// How much of a failed response's body is read for the error message.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// How much of that body an error message quotes.
const ERROR_PREVIEW_CHARS: usize = 300;
/// Reconnects of one SSE stream before rmcp gives up on it: unbounded by default, which would
/// let a server that keeps failing its stream hold tandem in a reconnect loop for ever. (rmcp
/// ends a stream at once on its own clients' too-large error, a private type; ours counts as
/// an ordinary stream failure, so this bound is what stops a server that keeps oversizing.)
const MAX_SSE_RECONNECTS: usize = 5;

type HttpResult<T> = Result<T, StreamableHttpError<McpHttpError>>;

/// rmcp's HTTP backend on tandem's reqwest: a newtype so the trait can be implemented here.
#[derive(Clone, Debug)]
pub struct McpHttpClient(reqwest::Client);

impl McpHttpClient {
    /// A client of its own: 10 s to connect, no overall timeout (a server's SSE stream stays
    /// open for the whole session; the caller times requests out), and redirects followed only
    /// within one origin and only as 307/308, so a configured header or token never reaches
    /// another host and a POST never turns into a GET.
    pub fn new() -> Result<Self, reqwest::Error> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            let keeps_method = matches!(
                attempt.status(),
                StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
            );
            if same_origin && keeps_method && attempt.previous().len() <= 10 {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .redirect(redirects)
            .build()
            .map(Self)
    }

    /// Wraps a client built elsewhere (its redirect and timeout settings then apply).
    pub fn with_client(client: reqwest::Client) -> Self {
        Self(client)
    }
}

/// A streamable HTTP transport to the MCP server at `url`, for `rmcp::serve_client`.
/// `bearer_token` is sent as `Authorization: Bearer`; `headers` (a `Vec` of pairs or the
/// config's map) go with every request.
/// Nothing is sent until the client initializes. Call it inside the tokio runtime: rmcp spawns
/// the transport's worker task at once.
pub fn transport(
    url: &str,
    bearer_token: Option<String>,
    headers: impl IntoIterator<Item = (String, String)>,
) -> Result<StreamableHttpClientTransport<McpHttpClient>, McpHttpError> {
    let client = McpHttpClient::new().map_err(|source| McpHttpError::Build {
        url: redact(url),
        source,
    })?;
    transport_with(client, url, bearer_token, headers)
}

/// [`transport`] over a given client.
pub fn transport_with(
    client: McpHttpClient,
    url: &str,
    bearer_token: Option<String>,
    headers: impl IntoIterator<Item = (String, String)>,
) -> Result<StreamableHttpClientTransport<McpHttpClient>, McpHttpError> {
    let config = transport_config(url, bearer_token, headers)?;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// Checks the URL, token and headers up front, so a mistake in the config is reported as such
/// rather than as a failed request later.
fn transport_config(
    url: &str,
    bearer_token: Option<String>,
    headers: impl IntoIterator<Item = (String, String)>,
) -> Result<StreamableHttpClientTransportConfig, McpHttpError> {
    let shown = redact(url);
    let parsed = reqwest::Url::parse(url).map_err(|error| McpHttpError::InvalidUrl {
        url: shown.clone(),
        reason: error.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(McpHttpError::InvalidUrl {
            url: shown,
            reason: "it needs an http:// or https:// scheme and a host".into(),
        });
    }
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let invalid = |reason: String| McpHttpError::InvalidHeader {
            url: shown.clone(),
            name: name.clone(),
            reason,
        };
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let lower = header.as_str();
        if RESERVED_HEADERS.contains(&lower) || lower.starts_with(RESERVED_HEADER_PREFIX) {
            return Err(McpHttpError::ReservedHeader { url: shown, name });
        }
        if header == AUTHORIZATION && bearer_token.is_some() {
            return Err(McpHttpError::DuplicateAuthorization { url: shown });
        }
        let mut value = HeaderValue::from_str(&value).map_err(|e| invalid(e.to_string()))?;
        // Configured headers often carry API keys: keep them out of Debug output.
        value.set_sensitive(true);
        custom.insert(header, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom)
        .max_sse_event_size(MAX_MESSAGE_BYTES)
        .max_json_response_size(MAX_MESSAGE_BYTES)
        .max_error_response_size(MAX_ERROR_BODY_BYTES);
    if let Some(token) = bearer_token {
        if token.trim().is_empty() {
            return Err(McpHttpError::EmptyToken { url: shown });
        }
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            McpHttpError::InvalidHeader {
                url: shown.clone(),
                name: "Authorization (the bearer token)".into(),
                reason: "the token holds characters a header cannot carry".into(),
            }
        })?;
        config = config.auth_header(token);
    }
    let mut backoff = ExponentialBackoff::default();
    backoff.max_times = Some(MAX_SSE_RECONNECTS);
    backoff.max_delay = Some(Duration::from_secs(10));
    config.retry_config = Arc::new(backoff);
    Ok(config)
}

/// `url` without credentials, query or fragment, which may hold secrets, for error messages.
fn redact(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or("");
            let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{host}{port}{}", parsed.scheme(), parsed.path())
        }
        Err(_) => url.chars().take_while(|c| *c != '?' && *c != '#').collect(),
    }
}

fn fail(error: McpHttpError) -> StreamableHttpError<McpHttpError> {
    StreamableHttpError::Client(error)
}

/// An error chain on one line: reqwest's own message ("error sending request") hides the cause
/// (connection refused, DNS, TLS) in its sources.
pub(super) fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

/// The request's headers: the configured and protocol headers rmcp passes, then what the
/// transport owns, which replaces any header of the same name.
fn request_headers(
    custom: HashMap<HeaderName, HeaderValue>,
    accept: &'static str,
    session_id: Option<&str>,
    url: &str,
) -> HttpResult<HeaderMap> {
    let mut headers: HeaderMap = custom.into_iter().collect();
    headers.insert(ACCEPT, HeaderValue::from_static(accept));
    if let Some(session_id) = session_id {
        let value = HeaderValue::from_str(session_id).map_err(|_| {
            fail(McpHttpError::BadSessionId {
                url: url.to_owned(),
            })
        })?;
        headers.insert(SESSION_ID, value);
    }
    Ok(headers)
}

/// Sends the request; a transport failure (refused, DNS, TLS) becomes [`McpHttpError::Unreachable`].
async fn send(request: reqwest::RequestBuilder, url: &str) -> HttpResult<reqwest::Response> {
    request.send().await.map_err(|source| {
        // reqwest's message quotes the whole URL, query included.
        let source = source.without_url();
        fail(McpHttpError::Unreachable {
            url: url.to_owned(),
            detail: chain(&source),
            source,
        })
    })
}

/// The media type of a response, lower case, without parameters.
fn media_type(response: &reqwest::Response) -> Option<String> {
    let value = response.headers().get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next().unwrap_or("").trim();
    Some(essence.to_ascii_lowercase())
}

/// The whole body, refused once it passes `max` bytes (checked before each chunk is kept).
async fn read_bounded(
    mut response: reqwest::Response,
    max: usize,
    url: &str,
) -> HttpResult<Vec<u8>> {
    let too_large = || {
        fail(McpHttpError::TooLarge {
            url: url.to_owned(),
            max,
        })
    };
    if response
        .content_length()
        .is_some_and(|len| len > max as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(source) => {
                let source = source.without_url();
                return Err(fail(McpHttpError::Body {
                    url: url.to_owned(),
                    detail: chain(&source),
                    source,
                }));
            }
        }
    }
}

/// Up to `max` bytes of an error body for the message; the rest is never read.
async fn read_prefix(mut response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = max - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// `": <what the body says>"` for an error message: a JSON-RPC error's message, or the text,
/// on one line and cut short.
fn error_detail(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<ServerJsonRpcMessage>(body) {
        Ok(ServerJsonRpcMessage::Error(error)) => error.error.message.to_string(),
        _ => String::from_utf8_lossy(body).into_owned(),
    };
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return String::new();
    }
    let mut cut: String = flat.chars().take(ERROR_PREVIEW_CHARS).collect();
    if cut.len() < flat.len() {
        cut.push('…');
    }
    format!(": {cut}")
}

fn status_error(url: &str, response: &reqwest::Response, detail: String) -> McpHttpError {
    let status = response.status();
    if status.is_redirection() {
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .map(|location| {
                response
                    .url()
                    .join(location)
                    .map(|joined| redact(joined.as_str()))
                    .unwrap_or_else(|_| redact(location))
            })
            .unwrap_or_else(|| "no Location".into());
        return McpHttpError::Redirect {
            url: url.to_owned(),
            status: status.as_u16(),
            location,
        };
    }
    McpHttpError::Status {
        url: url.to_owned(),
        status: status.as_u16(),
        detail,
    }
}

/// The 401/403 errors, which say whether a token was sent, since the next step differs.
fn auth_error(status: StatusCode, url: &str, token_sent: bool) -> Option<McpHttpError> {
    let url = url.to_owned();
    match status {
        StatusCode::UNAUTHORIZED if token_sent => Some(McpHttpError::TokenRefused { url }),
        StatusCode::UNAUTHORIZED => Some(McpHttpError::TokenRequired { url }),
        StatusCode::FORBIDDEN => Some(McpHttpError::Forbidden { url }),
        _ => None,
    }
}

impl StreamableHttpClient for McpHttpClient {
    type Error = McpHttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let url = redact(&uri);
        let token_sent = auth_header.is_some() || custom_headers.contains_key(&AUTHORIZATION);
        let accept = "application/json, text/event-stream";
        let headers = request_headers(custom_headers, accept, session_id.as_deref(), &url)?;
        let mut request = self.0.post(uri.as_ref()).headers(headers).json(&message);
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        let response = send(request, &url).await?;
        let status = response.status();
        let request_id = match &message {
            ClientJsonRpcMessage::Request(request) => Some((&request.id, &request.request)),
            _ => None,
        };
        let initializing = session_id.is_none()
            && matches!(request_id, Some((_, ClientRequest::InitializeRequest(_))));

        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if let Some(error) = auth_error(status, &url, token_sent) {
            return Err(fail(error));
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            // rmcp's worker starts a new session and retries the POST once.
            return Err(StreamableHttpError::SessionExpired);
        }
        if let Some((id, ClientRequest::DiscoverRequest(_))) = request_id {
            if session_id.is_none() && status.is_client_error() {
                // `server/discover` (rmcp's modern lifecycle) on a server of the older protocol:
                // answer it with a JSON-RPC error under the request's id, which the lifecycle
                // reads as "legacy server, fall back to initialize".
                let body = read_prefix(response, limits.max_error_response_size).await;
                return Ok(StreamableHttpPostResponse::Json(
                    discover_rejection(id, status, &body),
                    None,
                ));
            }
        }
        if initializing && status == StatusCode::METHOD_NOT_ALLOWED {
            // The old transport's endpoint is a GET stream; its POSTs go elsewhere.
            return Err(fail(McpHttpError::LegacySse {
                url,
                evidence: "it refused the initialize POST with 405 Method Not Allowed",
            }));
        }
        if initializing && status == StatusCode::NOT_FOUND {
            return Err(fail(McpHttpError::NotFound { url }));
        }
        if !status.is_success() {
            let id = request_id.map(|(id, _)| id);
            let error = non_success(response, &url, id, &limits).await?;
            return Ok(StreamableHttpPostResponse::Json(error, None));
        }

        let session = response
            .headers()
            .get(SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let Some((_, _)) = request_id else {
            // A notification, response or error awaits no reply: whatever a 2xx carries (some
            // servers answer 200 with an empty or JSON body) is of no use, so it is not read.
            return Ok(StreamableHttpPostResponse::Accepted);
        };
        match media_type(&response).as_deref() {
            Some(EVENT_STREAM) => {
                let mut events = sse_events(response, limits.max_sse_event_size, url.clone());
                if !initializing {
                    return Ok(StreamableHttpPostResponse::Sse(events, session));
                }
                // The old transport answers its stream's first event `endpoint` (where to POST);
                // look at the first event so that server is named rather than failing on parse.
                // A failure of that first event (too large, broken off) is returned from here too:
                // once this POST has answered, rmcp reports a failed stream only as a closed
                // connection, without the cause.
                let first = match events.next().await {
                    Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                        return Err(fail(McpHttpError::LegacySse {
                            url,
                            evidence: "it answered the initialize POST with an `endpoint` event",
                        }));
                    }
                    Some(Err(SseError::Body(error))) => {
                        return Err(match error.downcast::<McpHttpError>() {
                            Ok(error) => fail(*error),
                            Err(error) => StreamableHttpError::Sse(SseError::Body(error)),
                        });
                    }
                    first => first,
                };
                let events = stream::iter(first).chain(events).boxed();
                Ok(StreamableHttpPostResponse::Sse(events, session))
            }
            Some(JSON) => {
                let body = read_bounded(response, limits.max_json_response_size, &url).await?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(reply) => Ok(StreamableHttpPostResponse::Json(reply, session)),
                    Err(error) => Err(fail(McpHttpError::NotJsonRpc {
                        url,
                        detail: format!("{error}{}", error_detail(&body)),
                    })),
                }
            }
            other => Err(fail(McpHttpError::ContentType {
                url,
                content_type: other.unwrap_or("(none)").to_owned(),
            })),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        let url = redact(&uri);
        let headers = request_headers(custom_headers, "*/*", Some(&session_id), &url)?;
        let mut request = self.0.delete(uri.as_ref()).headers(headers);
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        let response = send(request, &url).await?;
        let status = response.status();
        // 405: the server does not let clients end sessions; 404: it is gone already. Either
        // way there is nothing left to end.
        if status.is_success()
            || matches!(
                status,
                StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND
            )
        {
            return Ok(());
        }
        Err(fail(status_error(&url, &response, String::new())))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let max = StreamableHttpResponseLimits::default().max_sse_event_size;
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let url = redact(&uri);
        let token_sent = auth_header.is_some() || custom_headers.contains_key(&AUTHORIZATION);
        let mut headers =
            request_headers(custom_headers, EVENT_STREAM, session_id.as_deref(), &url)?;
        if let Some(last) = last_event_id {
            // An id that is no valid header value cannot be resumed from; start afresh.
            if let Ok(value) = HeaderValue::from_str(&last) {
                headers.insert(LAST_EVENT_ID, value);
            }
        }
        let mut request = self.0.get(uri.as_ref()).headers(headers);
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        let response = send(request, &url).await?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            // The server offers no stream of its own; rmcp goes on without one.
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if let Some(error) = auth_error(status, &url, token_sent) {
            return Err(fail(error));
        }
        if !status.is_success() {
            let limits = StreamableHttpResponseLimits::default();
            // Without a request id, no body counts as an answer: this is always an error.
            return Err(match non_success(response, &url, None, &limits).await {
                Err(error) => error,
                Ok(_) => StreamableHttpError::UnexpectedServerResponse(
                    format!("HTTP {status} to the GET stream").into(),
                ),
            });
        }
        match media_type(&response).as_deref() {
            Some(EVENT_STREAM) => Ok(sse_events(response, max_sse_event_size, url)),
            other => Err(fail(McpHttpError::ContentType {
                url,
                content_type: other.unwrap_or("(none)").to_owned(),
            })),
        }
    }
}

/// A non-2xx answer: the server's JSON-RPC error when it sent one under the request's own id
/// (rmcp then hands that error to the caller, as for a 200), else an error quoting the start of
/// the body. Only a prefix of the body is ever read.
async fn non_success(
    response: reqwest::Response,
    url: &str,
    request_id: Option<&RequestId>,
    limits: &StreamableHttpResponseLimits,
) -> Result<ServerJsonRpcMessage, StreamableHttpError<McpHttpError>> {
    if response.status().is_redirection() {
        return Err(fail(status_error(url, &response, String::new())));
    }
    let status = response.status();
    let is_json = media_type(&response).as_deref() == Some(JSON);
    let body = read_prefix(response, limits.max_error_response_size).await;
    if is_json {
        if let Ok(ServerJsonRpcMessage::Error(error)) = serde_json::from_slice(&body) {
            if request_id.is_some() && error.id.as_ref() == request_id {
                return Ok(ServerJsonRpcMessage::Error(error));
            }
        }
    }
    let mut detail = error_detail(&body);
    if status == StatusCode::TOO_MANY_REQUESTS {
        detail.push_str(" (it is limiting tandem's requests: try again later)");
    }
    Err(fail(McpHttpError::Status {
        url: url.to_owned(),
        status: status.as_u16(),
        detail,
    }))
}

/// The JSON-RPC error standing for a refused sessionless `server/discover`: the server's own
/// error when it sent one (its id may not be the request's, so the request's is used).
fn discover_rejection(id: &RequestId, status: StatusCode, body: &[u8]) -> ServerJsonRpcMessage {
    let error = match serde_json::from_slice::<ServerJsonRpcMessage>(body) {
        Ok(ServerJsonRpcMessage::Error(error)) => error.error,
        _ => {
            ErrorData::invalid_request(format!("server/discover rejected with HTTP {status}"), None)
        }
    };
    ServerJsonRpcMessage::error(error, Some(id.clone()))
}
