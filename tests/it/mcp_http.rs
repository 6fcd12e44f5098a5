//! The MCP client's streamable HTTP transport (`tandem::mcp::http`) against a real server written
//! with the official Python SDK (`tests/mcp/http_server.py`, over streamable HTTP with a bearer
//! token), through rmcp's client: tools listed and called, the token required, the deprecated
//! HTTP+SSE transport refused by name (the SDK's own SSE server, and a hand-written one that
//! answers the initialize POST with an `endpoint` event), `tools/list_changed` delivered, and a
//! hostile SSE stream cut at the event limit.
//!
//! The SDK lives in a venv made by `tests/mcp/setup` (`~/.cache/tandem/mcp-venv`, or
//! `$TANDEM_MCP_VENV`); without it these tests fail with a message pointing there.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{json, Value};
use tandem::mcp::http::{cause, transport, McpHttpError, MAX_MESSAGE_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::support::mcp::{PyServer, MCP_STARTUP};

const TOKEN: &str = "s3cret-test-token";

const STARTUP: Duration = MCP_STARTUP;

/// The rmcp client over tandem's transport, or the error of its initialization.
async fn connect<H: ClientHandler>(
    handler: H,
    url: &str,
    token: Option<&str>,
    headers: Vec<(String, String)>,
) -> Result<RunningService<RoleClient, H>, rmcp::service::ClientInitializeError> {
    let transport = transport(url, token.map(str::to_owned), headers).expect("a valid config");
    tokio::time::timeout(STARTUP, handler.serve(transport))
        .await
        .expect("initialization finished in time")
}

/// The `McpHttpError` a failed initialization carries; panics with the whole error otherwise.
fn http_error(error: &rmcp::service::ClientInitializeError) -> &McpHttpError {
    cause(error).unwrap_or_else(|| panic!("no McpHttpError behind {error:?}"))
}

async fn call(
    client: &RunningService<RoleClient, impl ClientHandler>,
    name: &'static str,
    arguments: Value,
) -> Value {
    let mut params = CallToolRequestParams::new(name);
    if let Value::Object(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    let result = client.call_tool(params).await.expect("tools/call");
    serde_json::to_value(result).expect("serialize the result")
}

#[tokio::test]
async fn tools_are_listed_and_called_over_streamable_http() {
    let server = PyServer::start(&["--token", TOKEN]).await;
    // A custom header travels along without disturbing the transport's own.
    let headers = vec![("X-Tandem-Test".to_owned(), "1".to_owned())];
    let client = connect((), &server.url, Some(TOKEN), headers)
        .await
        .expect("connect with the right token");

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    for expected in [
        "echo", "slow", "crash", "add_tool", "image", "resource", "fail",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let echo = tools.iter().find(|tool| tool.name == "echo").expect("echo");
    let annotations = echo.annotations.as_ref().expect("echo's annotations");
    assert_eq!(annotations.read_only_hint, Some(true));

    let result = call(&client, "echo", json!({"text": "hello over HTTP"})).await;
    assert_eq!(result["content"][0]["text"], "hello over HTTP", "{result}");
    assert_ne!(result["isError"], true, "{result}");

    let result = call(&client, "image", json!({})).await;
    assert_eq!(result["content"][0]["type"], "image", "{result}");
    assert_eq!(result["content"][0]["mimeType"], "image/png", "{result}");

    let result = call(&client, "resource", json!({})).await;
    assert_eq!(result["content"][0]["type"], "resource", "{result}");
    assert_eq!(
        result["content"][0]["resource"]["text"], "remember the milk",
        "{result}"
    );

    let result = call(&client, "fail", json!({"reason": "no such thing"})).await;
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("no such thing"), "{result}");

    client.cancel().await.expect("close the session");
}

#[tokio::test]
async fn the_bearer_token_is_required_and_its_error_says_what_to_do() {
    let server = PyServer::start(&["--token", TOKEN]).await;

    let error = connect((), &server.url, Some("wrong-token"), vec![])
        .await
        .expect_err("a wrong token is refused");
    let found = http_error(&error);
    assert!(
        matches!(found, McpHttpError::TokenRefused { .. }),
        "{found:?}"
    );
    let message = found.to_string();
    assert!(
        message.contains("refused the bearer token (401 Unauthorized)")
            && message.contains("bearer_token_env")
            && message.contains(&server.url),
        "{message}"
    );
    assert!(
        !message.contains("wrong-token"),
        "the token leaked: {message}"
    );

    let error = connect((), &server.url, None, vec![])
        .await
        .expect_err("no token is refused");
    let message = http_error(&error).to_string();
    assert!(
        message.contains("401 Unauthorized to a request without a token")
            && message.contains("set bearer_token_env"),
        "{message}"
    );

    // The token may come as a configured Authorization header too (ACP's `headers`).
    let headers = vec![("Authorization".to_owned(), format!("Bearer {TOKEN}"))];
    let client = connect((), &server.url, None, headers)
        .await
        .expect("the token as a header");
    client.cancel().await.expect("close the session");
}

/// Counts `notifications/tools/list_changed`.
struct ListChanged(mpsc::UnboundedSender<()>);

impl ClientHandler for ListChanged {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let _ = self.0.send(());
        std::future::ready(())
    }
}

#[tokio::test]
async fn tools_list_changed_reaches_the_client() {
    let server = PyServer::start(&["--token", TOKEN]).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = connect(ListChanged(tx), &server.url, Some(TOKEN), vec![])
        .await
        .expect("connect");

    let result = call(&client, "add_tool", json!({"name": "late_tool"})).await;
    assert_eq!(result["content"][0]["text"], "added late_tool", "{result}");
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("notifications/tools/list_changed arrived in time")
        .expect("the handler is alive");

    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(
        tools.iter().any(|tool| tool.name == "late_tool"),
        "the new tool is listed"
    );
    let result = call(&client, "late_tool", json!({"text": "hi"})).await;
    assert_eq!(result["content"][0]["text"], "late_tool: hi", "{result}");
    client.cancel().await.expect("close the session");
}

#[tokio::test]
async fn a_server_of_the_deprecated_sse_transport_is_refused_by_name() {
    // The Python SDK's own HTTP+SSE server: its /sse endpoint is GET-only (405 to POST).
    let server = PyServer::start(&["--token", TOKEN, "--sse"]).await;
    let error = connect((), &server.url, Some(TOKEN), vec![])
        .await
        .expect_err("the SSE transport is refused");
    let found = http_error(&error);
    assert!(matches!(found, McpHttpError::LegacySse { .. }), "{found:?}");
    let message = found.to_string();
    assert!(
        message.contains("speaks the deprecated HTTP+SSE transport")
            && message.contains("tandem supports streamable HTTP only")
            && message.contains("405"),
        "{message}"
    );

    // A server that answers the initialize POST with its `endpoint` event instead.
    let url = raw_server(|stream| async move {
        let mut stream = stream;
        let _ = stream
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n\
                  event: endpoint\ndata: /messages?session_id=1\n\n",
            )
            .await;
        // Keep the stream open, as such a server does.
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let error = connect((), &url, None, vec![])
        .await
        .expect_err("the SSE transport is refused");
    let message = http_error(&error).to_string();
    assert!(
        message.contains("speaks the deprecated HTTP+SSE transport")
            && message.contains("`endpoint` event"),
        "{message}"
    );
}

#[tokio::test]
async fn a_hostile_sse_stream_is_cut_at_the_event_limit() {
    // One event that never ends: the client must give up at the limit, not buffer for ever.
    let url = raw_server(|stream| async move {
        let mut stream = stream;
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ";
        if stream.write_all(head).await.is_err() {
            return;
        }
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0usize;
        while stream.write_all(&chunk).await.is_ok() {
            sent += chunk.len();
            // Far past the limit and still not cut: stop, the assertion below fails.
            if sent > 4 * MAX_MESSAGE_BYTES {
                return;
            }
        }
    })
    .await;
    let error = connect((), &url, None, vec![])
        .await
        .expect_err("the stream is refused");
    let found = http_error(&error);
    assert!(
        matches!(found, McpHttpError::TooLarge { max, .. } if *max == MAX_MESSAGE_BYTES),
        "{found:?}"
    );
}

#[tokio::test]
async fn config_mistakes_and_an_unreachable_server_name_the_next_step() {
    let refuse = |url: &str, headers: Vec<(String, String)>| {
        transport(url, Some(TOKEN.to_owned()), headers)
            .err()
            .expect("refused")
            .to_string()
    };
    let message = refuse("ftp://example.com/mcp", vec![]);
    assert!(
        message.contains("set url to the server's streamable HTTP endpoint"),
        "{message}"
    );
    let message = refuse(
        "http://127.0.0.1:1/mcp",
        vec![("Mcp-Session-Id".into(), "x".into())],
    );
    assert!(
        message.contains("one the MCP transport sets itself"),
        "{message}"
    );
    let message = refuse(
        "http://127.0.0.1:1/mcp",
        vec![("Authorization".into(), "Bearer x".into())],
    );
    assert!(
        message.contains("both a bearer token and an Authorization header"),
        "{message}"
    );

    // A port nobody listens on (taken, then released).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    let url = format!("http://127.0.0.1:{port}/mcp?key=hidden");
    let error = connect((), &url, None, vec![])
        .await
        .expect_err("nobody answers");
    let message = http_error(&error).to_string();
    assert!(
        message.contains("could not reach the MCP server")
            && message.contains("check that the server runs"),
        "{message}"
    );
    assert!(!message.contains("hidden"), "the query leaked: {message}");
}

/// A loopback HTTP server that reads each request's head and hands the connection to `answer`;
/// returns its URL.
async fn raw_server<F, Fut>(answer: F) -> String
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                // The request head, up to its blank line (its body is of no interest).
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                answer(stream).await;
            });
        }
    });
    url
}
