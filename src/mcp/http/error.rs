//! The errors of the MCP HTTP transport: each names the cause and the next step, and none shows
//! a token, a header value or a URL's query.

use std::error::Error as StdError;

use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use rmcp::transport::DynamicTransportError;

/// What went wrong talking to an MCP server over HTTP, each message with the next step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpHttpError {
    #[error("the MCP server url `{url}` is not usable ({reason}): set url to the server's streamable HTTP endpoint, such as http://127.0.0.1:8931/mcp")]
    InvalidUrl { url: String, reason: String },
    #[error("the header `{name}` for the MCP server at {url} is not a valid HTTP header ({reason}): fix its name or value")]
    InvalidHeader {
        url: String,
        name: String,
        reason: String,
    },
    #[error("the header `{name}` for the MCP server at {url} is one the MCP transport sets itself: remove it from the server's headers")]
    ReservedHeader { url: String, name: String },
    #[error("the MCP server at {url} has both a bearer token and an Authorization header: keep one of them")]
    DuplicateAuthorization { url: String },
    #[error("the bearer token for the MCP server at {url} is empty: put the token in the environment variable named by bearer_token_env")]
    EmptyToken { url: String },
    #[error("could not set up the HTTP client for the MCP server at {url}: {source}")]
    Build {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("could not reach the MCP server at {url} ({detail}): check that the server runs and that url is right")]
    Unreachable {
        url: String,
        detail: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the MCP server at {url} answered 401 Unauthorized to a request without a token: set bearer_token_env to the name of an environment variable holding its token (or send an Authorization header)")]
    TokenRequired { url: String },
    #[error("the MCP server at {url} refused the bearer token (401 Unauthorized): check the token in the environment variable named by bearer_token_env (or the Authorization header)")]
    TokenRefused { url: String },
    #[error("the MCP server at {url} answered 403 Forbidden: the token is valid but lacks access; ask the server's owner for a token with access")]
    Forbidden { url: String },
    #[error("the MCP server at {url} speaks the deprecated HTTP+SSE transport ({evidence}); tandem supports streamable HTTP only: point url at the server's streamable HTTP endpoint (often /mcp rather than /sse), or start the server with its streamable HTTP option")]
    LegacySse { url: String, evidence: &'static str },
    #[error("the MCP server at {url} answered 404 Not Found: check the path of url (streamable HTTP servers often serve /mcp)")]
    NotFound { url: String },
    #[error("the MCP server at {url} redirected ({status}) to {location}, which tandem does not follow (only same-origin 307/308 are): set url to the final address")]
    Redirect {
        url: String,
        status: u16,
        location: String,
    },
    #[error("the MCP server at {url} answered HTTP {status}{detail}")]
    Status {
        url: String,
        status: u16,
        detail: String,
    },
    #[error("the MCP server at {url} answered with content type {content_type}, not JSON or an SSE stream: check that url is the server's MCP endpoint")]
    ContentType { url: String, content_type: String },
    #[error("the MCP server at {url} sent a message over {max} bytes; tandem refuses it so a misbehaving server cannot exhaust memory")]
    TooLarge { url: String, max: usize },
    #[error("the MCP server at {url} sent a body that is not a JSON-RPC message ({detail})")]
    NotJsonRpc { url: String, detail: String },
    #[error("the MCP server at {url} sent an Mcp-Session-Id that cannot be sent back as a header: the server is broken; report it to its owner")]
    BadSessionId { url: String },
    #[error("the MCP server at {url} broke off its response ({detail})")]
    Body {
        url: String,
        detail: String,
        #[source]
        source: reqwest::Error,
    },
}

/// The [`McpHttpError`] behind an error of an MCP HTTP session, if one is: `serve_client`'s
/// `ClientInitializeError`, a request's `ServiceError`, or anything wrapping them as a source.
/// rmcp boxes the transport's errors, and its `Client(E)` variant is no `source()`, so walking
/// the chain alone would not find it.
pub fn cause<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a McpHttpError> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<McpHttpError>() {
            return Some(found);
        }
        if let Some(StreamableHttpError::Client(found)) =
            error.downcast_ref::<StreamableHttpError<McpHttpError>>()
        {
            return Some(found);
        }
        if let Some(dynamic) = error.downcast_ref::<DynamicTransportError>() {
            if let Some(found) = cause(dynamic.error.as_ref()) {
                return Some(found);
            }
        }
        if let Some(ClientInitializeError::TransportError { error, .. }) =
            error.downcast_ref::<ClientInitializeError>()
        {
            if let Some(found) = cause(error) {
                return Some(found);
            }
        }
        current = error.source();
    }
    None
}
