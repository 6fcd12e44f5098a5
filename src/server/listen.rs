//! `tandem serve --listen ws://HOST:PORT` (DESIGN 7.5): the native protocol over WebSocket,
//! one JSON-RPC message per text frame, so a second client (another editor window, a browser
//! page, a phone through an SSH tunnel) can watch and drive the sessions of a running server.
//!
//! Each connection is a [`Connection`] like stdio's: one read loop applies its frames in
//! arrival order (the same dispatch), and one writer task sends what the connection's
//! [`Outbound`] queues, so a response still leaves before the events its request caused.
//!
//! Who may connect is decided in the handshake, before any frame is read: a browser `Origin`
//! not on the allow-list is refused (403), so is a `Host` other than loopback when bound to
//! loopback (DNS rebinding), and a request without the token (`Authorization: Bearer TOKEN` or
//! `?token=TOKEN`; browsers cannot set headers on a WebSocket) is refused (401). The token is
//! random per start and written to `DIR/attach-token` with mode 0600; the shell sandbox covers
//! that file, so a command the model runs cannot read it and attach to approve its own calls.
//!
//! Invariants: frames of one connection are handled in order, never two at once; a message
//! over [`MAX_MESSAGE_BYTES`] or a text frame that is not UTF-8 ends that connection only (the
//! WebSocket library cannot skip one; the client attaches again from its last `seq`); a client
//! that stops reading loses streamed pieces past `outbound_buffer_bytes` (as on stdio) and is
//! disconnected when `attach_backlog_bytes` (64 MiB) wait behind the message being written, so a
//! stalled client never holds unbounded memory.
//! Does not: speak any protocol but the native one, or serve TLS (tunnel it: `ssh -L`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use super::{Connection, Flow, Outbound, QueuedBytes, Shared, Transport};
use crate::protocol::{ErrorKind, RpcErrorObject};
use crate::workspace::protected::ATTACH_TOKEN_FILE;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest message a client may send (the stdio frame cap); a larger one ends the
/// connection.
pub const MAX_MESSAGE_BYTES: usize = super::framing::MAX_FRAME_BYTES;

/// The read buffer of one connection.
const READ_BUFFER_BYTES: usize = 8 * 1024;

/// How long a client has to finish the WebSocket handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many WebSocket clients at once; more are refused until one leaves.
const MAX_CONNECTIONS: usize = 256;

/// Where `serve` talks to clients: one `--listen` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenTarget {
    /// `stdio` (or `stdio://`): the process's stdin and stdout.
    Stdio,
    /// `ws://HOST:PORT`.
    WebSocket(SocketAddr),
}

/// Parse one `--listen` value: `stdio`, `stdio://`, or `ws://HOST:PORT` where HOST is an IP
/// address or `localhost` and PORT may be 0 (any free port; the address is printed).
pub fn parse_listen(text: &str) -> Result<ListenTarget, String> {
    if text == "stdio" || text == "stdio://" {
        return Ok(ListenTarget::Stdio);
    }
    let Some(rest) = text.strip_prefix("ws://") else {
        return Err(format!(
            "--listen `{text}` is neither `stdio` nor `ws://HOST:PORT`; for example --listen ws://127.0.0.1:7777 (wss is not served: tunnel with ssh -L)"
        ));
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = rest.rsplit_once(':').ok_or_else(|| {
        format!("--listen `{text}` has no port; write ws://127.0.0.1:PORT (0 picks a free one)")
    })?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("--listen `{text}`: `{port}` is not a port number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = if host == "localhost" {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse().map_err(|_| {
            format!("--listen `{text}`: `{host}` is not an IP address or `localhost`")
        })?
    };
    Ok(ListenTarget::WebSocket(SocketAddr::new(ip, port)))
}

/// How the WebSocket listener runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenOptions {
    pub address: SocketAddr,
    /// Browser origins allowed to connect (`--allow-origin`), exactly as browsers send them
    /// (`http://localhost:5173`). A request without an `Origin` (not a browser) is not refused
    /// for it.
    pub allowed_origins: Vec<String>,
}

/// What a handshake is checked against.
struct Admission {
    token: String,
    /// `DATA_DIR/attach-token`: another tandem listening on the same data directory writes its
    /// token there, which this one accepts too (see [`serve_connection`]).
    token_path: PathBuf,
    allowed_origins: Vec<String>,
    /// Bound to a loopback address: the `Host` must name loopback too.
    loopback: bool,
}

/// The running listener; [`Listener::stop`] closes it and every connection.
pub(crate) struct Listener {
    accepting: tokio::task::JoinHandle<()>,
}

impl Listener {
    pub(crate) async fn stop(self) {
        self.accepting.abort();
        let _ = self.accepting.await;
    }
}

/// Bind, write the token file, and accept connections on a task until [`Listener::stop`].
#[allow(
    clippy::print_stderr,
    reason = "the address a user or script connects to is printed once, whatever RUST_LOG says"
)]
pub(crate) async fn start(
    shared: Arc<Shared>,
    options: &ListenOptions,
    data_dir: &Path,
) -> anyhow::Result<Listener> {
    let token = new_token();
    let token_path = data_dir.join(ATTACH_TOKEN_FILE);
    let (path, written) = (token_path.clone(), token.clone());
    tokio::task::spawn_blocking(move || write_token(&path, &written))
        .await
        .map_err(|e| anyhow::anyhow!("writing the attach token crashed: {e}"))?
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot write the attach token to {}: {e}; pass a writable --data-dir",
                token_path.display()
            )
        })?;
    let listener = TcpListener::bind(options.address).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on ws://{}: {e}; pick another port (0 picks a free one)",
            options.address
        )
    })?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() {
        tracing::warn!(
            "listening on {local}, which is not loopback: anyone who can reach it and has the token can drive your sessions"
        );
    }
    eprintln!(
        "tandem: listening on ws://{local} (clients send the token in {})",
        token_path.display()
    );
    let _ = shared.attach.set(crate::protocol::AttachInfo {
        url: format!("ws://{local}"),
        token_file: token_path.display().to_string(),
    });
    let admission = Arc::new(Admission {
        token,
        token_path: token_path.clone(),
        allowed_origins: options.allowed_origins.clone(),
        loopback: local.ip().is_loopback(),
    });
    let accepting = tokio::spawn(accept_loop(listener, shared, admission));
    Ok(Listener { accepting })
}

/// SIGINT and SIGTERM, caught from the moment this is made: a `--listen` server without stdio
/// runs until one arrives.
///
/// Made before the address is printed, so a client that reads the address and at once sends
/// SIGTERM never meets the default action (death by signal, status -15) nor a handler half
/// installed (tokio drops a signal that lands between installing the handler and subscribing).
pub(crate) struct StopSignals {
    interrupt: Option<tokio::signal::unix::Signal>,
    terminate: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    pub(crate) fn catch() -> StopSignals {
        use tokio::signal::unix::{signal, SignalKind};
        let catch = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(signal) => Some(signal),
            Err(e) => {
                tracing::warn!("{name} cannot be caught ({e}); it ends tandem without cleanup");
                None
            }
        };
        StopSignals {
            interrupt: catch(SignalKind::interrupt(), "SIGINT"),
            terminate: catch(SignalKind::terminate(), "SIGTERM"),
        }
    }

    /// Resolves at the first SIGINT or SIGTERM since [`StopSignals::catch`].
    pub(crate) async fn arrived(mut self) {
        async fn next(signal: &mut Option<tokio::signal::unix::Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        tokio::select! {
            () = next(&mut self.interrupt) => {}
            () = next(&mut self.terminate) => {}
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, admission: Arc<Admission>) {
    // Dropped (aborting every connection) when the listener stops.
    let mut connections = JoinSet::new();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!("accepting a WebSocket client failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!("refused {peer}: {MAX_CONNECTIONS} WebSocket clients are connected");
            continue;
        };
        let (shared, admission) = (shared.clone(), admission.clone());
        connections.spawn(async move {
            serve_connection(shared, admission, stream).await;
            drop(slot);
        });
    }
}

/// One WebSocket client from handshake to close.
async fn serve_connection(shared: Arc<Shared>, admission: Arc<Admission>, stream: TcpStream) {
    // Each delta is a small frame that should leave now: without this, Nagle's algorithm holds
    // a frame until the previous one is acknowledged, and delayed ACKs make that tens of ms.
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!("TCP_NODELAY could not be set: {e}");
    }
    // The library's 128 KiB read buffer per connection is most of an idle client's cost;
    // client messages are small, and a large one still arrives (the buffer grows per read).
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES));
    // A second tandem started with --listen on the same data directory (another editor window)
    // replaces the token file; its token is accepted here too, so this server's clients that
    // read the file keep working. Whoever can read that file could drive that server anyway.
    let current_file = tokio::fs::read_to_string(&admission.token_path)
        .await
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|text| is_token(text));
    #[allow(
        clippy::result_large_err,
        reason = "the handshake callback's signature is tungstenite's"
    )]
    let check = move |request: &Request, response: Response| match admit(
        &admission,
        current_file.as_deref(),
        request,
    ) {
        Ok(()) => Ok(response),
        Err((status, why)) => Err(refusal(status, why)),
    };
    let handshake = tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config));
    let websocket = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(websocket)) => websocket,
        Ok(Err(e)) => {
            tracing::info!("a WebSocket handshake failed: {e}");
            return;
        }
        Err(_) => {
            tracing::info!("a WebSocket client did not finish its handshake in time");
            return;
        }
    };
    // One task owns the socket and moves frames both ways; the connection's read loop below
    // takes the incoming ones from a channel. (Splitting the stream into halves polled by two
    // tasks lost wake-ups under load: a frame stayed unread until something else woke the
    // reader, measured as a hung `approve` in `tests/it/attach.rs`.)
    let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let (incoming_tx, mut incoming) = mpsc::unbounded_channel::<Message>();
    let limit = shared.engine.config.attach_backlog_bytes;
    let queued = Arc::new(QueuedBytes::with_limit(limit));
    let unread = Arc::new(AtomicUsize::new(0));
    let (closing, closed) = oneshot::channel::<()>();
    let socket = tokio::spawn(move_frames(
        websocket,
        rx,
        incoming_tx,
        queued.clone(),
        unread.clone(),
        closed,
    ));
    let out = Outbound {
        tx,
        stdout: None,
        queued_bytes: Some(queued.clone()),
    };
    let mut connection = Connection::new(shared, Transport::WebSocket, out);
    let mut stalled = false;
    loop {
        let frame = tokio::select! {
            frame = incoming.recv() => frame,
            () = queued.overflow_notified() => {
                // Woken by the limit, or by the socket task ending (the client went away).
                stalled = !queued.is_closed();
                None
            }
        };
        let Some(frame) = frame else { break };
        unread.fetch_sub(frame.len(), Ordering::AcqRel);
        match frame {
            Message::Text(text) => {
                let flow = connection.handle_message(text.as_bytes()).await;
                if flow == Flow::Shutdown {
                    break;
                }
            }
            Message::Binary(_) => connection.out.respond::<()>(
                &serde_json::Value::Null,
                Err(RpcErrorObject::new(
                    ErrorKind::InvalidRequest,
                    "binary frames are not read; send each JSON-RPC message as one text frame",
                )),
            ),
            Message::Close(_) => break,
            // Pings are answered by the library; pongs and raw frames carry nothing for us.
            _ => {}
        }
    }
    connection.close();
    drop(connection);
    if stalled {
        // The socket task waits for a client that does not read: end it, which closes the
        // socket.
        tracing::warn!(
            "a WebSocket client left more than {limit} bytes unread; it was disconnected (it can attach again from its last seq)"
        );
        socket.abort();
    } else {
        let _ = closing.send(());
    }
    let _ = socket.await;
}

/// The most bytes of frames read from a client and not yet handled; past it the socket task
/// stops reading until the connection catches up (a client sending faster than its requests are
/// handled is held back by TCP, not buffered without bound).
const MAX_UNREAD_BYTES: usize = 2 * MAX_MESSAGE_BYTES;

/// The socket's task: sends what the connection queues, reads frames for it, until either side
/// ends. After `closed` fires it sends what is already queued (the answer to a `shutdown`) and
/// closes.
async fn move_frames(
    mut websocket: tokio_tungstenite::WebSocketStream<TcpStream>,
    mut outgoing: mpsc::UnboundedReceiver<Vec<u8>>,
    incoming: mpsc::UnboundedSender<Message>,
    queued: Arc<QueuedBytes>,
    unread: Arc<AtomicUsize>,
    mut closed: oneshot::Receiver<()>,
) {
    loop {
        let reading = unread.load(Ordering::Acquire) < MAX_UNREAD_BYTES;
        tokio::select! {
            _ = &mut closed => {
                while let Ok(body) = outgoing.try_recv() {
                    if websocket.send(text_frame(body)).await.is_err() {
                        break;
                    }
                }
                break;
            }
            body = outgoing.recv() => {
                let Some(body) = body else { break };
                // Counted off as it is taken, so the message being written (up to 16 MiB to a
                // slow reader) never counts against the limit by itself.
                queued.written(body.len());
                if websocket.send(text_frame(body)).await.is_err() {
                    break;
                }
            }
            frame = websocket.next(), if reading => {
                match frame {
                    Some(Ok(frame)) => {
                        unread.fetch_add(frame.len(), Ordering::AcqRel);
                        if incoming.send(frame).is_err() {
                            break;
                        }
                    }
                    Some(Err(e)) => {
                        tracing::info!("a WebSocket connection ended: {e}");
                        break;
                    }
                    None => break,
                }
            }
        }
    }
    let _ = websocket.close(None).await;
    // A replay waiting for room, or the read loop waiting for frames, learns the client is gone.
    queued.close();
}

fn text_frame(body: Vec<u8>) -> Message {
    // Every message tandem builds is JSON from serde, so UTF-8; lossy only as a guard.
    match String::from_utf8(body) {
        Ok(text) => Message::text(text),
        Err(e) => Message::text(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

/// Whether a handshake may become a connection: `Err` carries the status and why.
fn admit(
    admission: &Admission,
    current_file: Option<&str>,
    request: &Request,
) -> Result<(), (StatusCode, String)> {
    let headers = request.headers();
    if let Some(origin) = headers.get("origin") {
        let origin = origin.to_str().unwrap_or_default().trim_end_matches('/');
        let allowed = admission
            .allowed_origins
            .iter()
            .any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(origin));
        if !allowed {
            return Err((
                StatusCode::FORBIDDEN,
                format!(
                    "browser origin `{origin}` is not allowed to attach; start tandem serve with --allow-origin {origin} to allow it"
                ),
            ));
        }
    }
    if admission.loopback {
        let host = headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !is_loopback_host(host) {
            return Err((
                StatusCode::FORBIDDEN,
                format!(
                    "Host `{host}` is not loopback; this server listens on loopback, connect to 127.0.0.1 or localhost"
                ),
            ));
        }
    }
    let bearer = headers
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim);
    let from_query = request.uri().query().and_then(|query| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))
    });
    match bearer.or(from_query) {
        Some(token)
            if same_secret(token.as_bytes(), admission.token.as_bytes())
                || current_file.is_some_and(|file| same_secret(token.as_bytes(), file.as_bytes())) =>
        {
            Ok(())
        }
        Some(_) => Err((
            StatusCode::UNAUTHORIZED,
            format!(
                "the attach token is wrong; send the current contents of the data directory's {ATTACH_TOKEN_FILE} (it changes at every start)"
            ),
        )),
        None => Err((
            StatusCode::UNAUTHORIZED,
            format!(
                "no attach token; send `Authorization: Bearer TOKEN` (or ?token=TOKEN) with the contents of the data directory's {ATTACH_TOKEN_FILE}"
            ),
        )),
    }
}

/// What [`new_token`] makes: 64 lowercase hex digits.
fn is_token(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `127.0.0.1`, `localhost`, `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Compare without stopping at the first difference, so the time taken says nothing about how
/// much of a guess was right.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

fn refusal(status: StatusCode, why: String) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(why));
    *response.status_mut() = status;
    response
}

/// 244 random bits (two v4 UUIDs), as 64 hex digits.
fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Write the token with mode 0600 through a file of our own, then rename it into place, so a
/// reader never sees half a token and the file is never readable by others, even for a moment.
fn write_token(path: &Path, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temporary: PathBuf = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_values() {
        assert_eq!(parse_listen("stdio"), Ok(ListenTarget::Stdio));
        assert_eq!(
            parse_listen("ws://127.0.0.1:0"),
            Ok(ListenTarget::WebSocket("127.0.0.1:0".parse().unwrap()))
        );
        assert_eq!(
            parse_listen("ws://localhost:7777/"),
            Ok(ListenTarget::WebSocket("127.0.0.1:7777".parse().unwrap()))
        );
        assert_eq!(
            parse_listen("ws://[::1]:9"),
            Ok(ListenTarget::WebSocket("[::1]:9".parse().unwrap()))
        );
        assert!(parse_listen("wss://127.0.0.1:1")
            .unwrap_err()
            .contains("ssh -L"));
        assert!(parse_listen("ws://127.0.0.1")
            .unwrap_err()
            .contains("no port"));
        assert!(parse_listen("ws://example.com:80").is_err());
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "127.0.0.1:80",
            "localhost:1",
            "LOCALHOST",
            "[::1]:5",
            "127.0.0.2",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["example.com", "evil.localhost.example:1", "10.0.0.1:80", ""] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn tokens_are_64_hex_digits() {
        assert!(is_token(&new_token()));
        assert_ne!(new_token(), new_token());
        assert!(!is_token("abc"));
        assert!(!is_token(&"G".repeat(64)));
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
    }
}
