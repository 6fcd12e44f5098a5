//! The stdio connection of `tandem serve`: the read loop over stdin (either framing, detected
//! from the first bytes) and the outbound sides that write to stdout, or to a channel or a pipe
//! for in-process drivers (tests, benchmarks).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use serde_json::Value;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use super::framing::{self, Frame, FrameReader};
use super::{stdout, Connection, Flow, Outbound, Shared, Transport};
use crate::config::Config;
use crate::engine::EngineContext;
use crate::protocol::{ErrorKind, Framing, RpcErrorObject};
use crate::store::Store;
use crate::workspace::protected::OwnFiles;

/// The framing shared with the writer: 0 undecided (NDJSON), 1 NDJSON, 2 Content-Length.
pub(super) fn framing_code(framing: Framing) -> u8 {
    match framing {
        Framing::Ndjson => 1,
        Framing::ContentLength => 2,
    }
}

/// The framing a [`framing_code`] stands for; undecided (0) answers in NDJSON.
pub(super) fn framing_from_code(code: u8) -> Framing {
    match code {
        2 => Framing::ContentLength,
        _ => Framing::Ndjson,
    }
}

/// The stdio connection of `serve`, on the real stdin/stdout.
///
/// When it ends, the process ends: the listener (if any) stops, then every session, whose last
/// events still reach stdout (the connection is let go of only after that).
pub(super) async fn serve_stdio(
    shared: Arc<Shared>,
    listener: Option<super::listen::Listener>,
) -> anyhow::Result<()> {
    let (tx, rx) = mpsc::unbounded_channel();
    let framing = Arc::new(AtomicU8::new(0));
    let (stdout, writer) = stdout::spawn_writer(rx, framing.clone()).map_err(|e| {
        anyhow::anyhow!("cannot write to stdout ({e}); start tandem with stdout open")
    })?;
    let out = Outbound {
        tx,
        stdout: Some(stdout),
        queued_bytes: None,
    };
    let connection = read_stdio(shared.clone(), tokio::io::stdin(), out, framing).await;
    if let Some(listener) = listener {
        listener.stop().await;
    }
    shared.shut_down().await;
    // Let go of the outbound side everywhere, so the writer sees its channel close.
    let mut connection = connection;
    connection.close();
    drop(connection);
    // All senders are dropped by now, so the writer drains what is queued and exits.
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    Ok(())
}

/// The read loop, generic over the input so tests and benchmarks can drive it in-process.
pub async fn run(
    config: Config,
    own_files: OwnFiles,
    input: impl AsyncRead + Unpin,
    out: Outbound,
    framing_shared: Arc<AtomicU8>,
    store: Option<tokio::task::JoinHandle<Result<Store, crate::store::StoreError>>>,
) -> anyhow::Result<()> {
    let engine = EngineContext::new(config, own_files);
    let shared = Shared::new(engine, store, false);
    let connection = read_stdio(shared.clone(), input, out, framing_shared).await;
    shared.shut_down().await;
    // Let go of the outbound side everywhere, so the writer sees its channel close.
    let mut connection = connection;
    connection.close();
    drop(connection);
    Ok(())
}

/// One stdio connection: frames in arrival order until `shutdown` or the end of input. The
/// connection is returned still subscribed, so the events of the shutdown that follows reach
/// the client.
async fn read_stdio(
    shared: Arc<Shared>,
    input: impl AsyncRead + Unpin,
    out: Outbound,
    framing_shared: Arc<AtomicU8>,
) -> Connection {
    let mut connection = Connection::new(shared, Transport::Stdio, out);
    let mut reader = FrameReader::new(input);
    loop {
        let frame = match reader.next_frame().await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("stdin read failed: {e}; shutting down");
                break;
            }
        };
        if let Some(detected) = reader.framing() {
            if connection.framing != detected || framing_shared.load(Ordering::SeqCst) == 0 {
                connection.framing = detected;
                framing_shared.store(framing_code(detected), Ordering::SeqCst);
            }
        }
        let bytes = match frame {
            Frame::Message(bytes) => bytes,
            Frame::TooLarge => {
                connection.out.respond::<()>(
                    &Value::Null,
                    Err(RpcErrorObject::new(
                        ErrorKind::FrameTooLarge,
                        format!(
                            "frame larger than {} bytes was skipped; send smaller messages (attach large files by path)",
                            framing::MAX_FRAME_BYTES
                        ),
                    )),
                );
                continue;
            }
            Frame::Malformed(problem) => {
                connection.out.respond::<()>(
                    &Value::Null,
                    Err(RpcErrorObject::new(
                        ErrorKind::ParseError,
                        format!("parse error: {problem}"),
                    )),
                );
                continue;
            }
        };
        if connection.handle_message(&bytes).await != Flow::Continue {
            break;
        }
    }
    connection
}

/// Build an [`Outbound`] and its receiver, for in-process drivers (benchmarks, tests).
pub fn outbound_channel() -> (Outbound, mpsc::UnboundedReceiver<Vec<u8>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Outbound {
            tx,
            stdout: None,
            queued_bytes: None,
        },
        rx,
    )
}

/// An outbound side that writes framed messages to `fd` (the write end of a pipe or socket)
/// exactly as `serve` writes its stdout: straight from the sending thread when it can, else on
/// a writer thread. For in-process drivers that must measure the real output path, not a
/// channel. The thread ends, and the returned handle joins, once `run` returned.
pub fn outbound_to_fd(
    fd: OwnedFd,
    framing: Arc<AtomicU8>,
) -> (Outbound, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (stdout, writer) = stdout::spawn_writer_on(fd, rx, framing);
    (
        Outbound {
            tx,
            stdout: Some(stdout),
            queued_bytes: None,
        },
        writer,
    )
}
