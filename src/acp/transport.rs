//! The ACP face's stdio transport: newline-delimited JSON-RPC lines, read with a cap and
//! checked before the `agent-client-protocol` crate sees them.
//!
//! The crate's own `Stdio` reads lines with `BufRead::lines`: one line of invalid UTF-8 ends
//! the connection (and the running turn with it), a line without a newline is buffered without
//! bound, and its parse-error reply echoes the whole line back (2 MB was seen). So tandem hands
//! the crate a [`Lines`] transport whose incoming side it reads itself:
//!
//! - a line over [`MAX_LINE_BYTES`] is skipped as it streams past (never buffered) and answered
//!   with an `invalidRequest` error, as the native face does with its frame cap;
//! - a line that is not UTF-8, or not JSON, is answered here with a JSON-RPC parse error that
//!   names the cause and carries the request's `id` whenever it could be read, and quotes none
//!   of the input; the connection lives on;
//! - a lone surrogate escape (`"\ud800"`: valid JSON, but not a Unicode scalar) becomes U+FFFD
//!   instead of making the whole message unparsable;
//! - the end of stdin is reported on [`StdioTransport::input_closed`], so the face can exit
//!   within a second in every state instead of waiting for whatever the crate waits for.
//!
//! Outgoing lines go through one channel to one writer task, shared with the replies written
//! here, so the two never interleave inside a line.

use std::io;

use agent_client_protocol::Lines;
use futures_util::{Sink, Stream};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The most bytes of one incoming line (one message). A prompt with a few images fits.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// JSON-RPC codes used for the replies written here.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

pub struct StdioTransport<O, I> {
    pub lines: Lines<O, I>,
    /// Resolves when stdin has ended (or failed).
    pub input_closed: oneshot::Receiver<()>,
    /// Ends once every outgoing line is written (after the crate and the reader let go).
    pub writer: tokio::task::JoinHandle<()>,
}

/// The transport over `input` and `output` (stdin and stdout for `tandem acp`; tests may pass
/// pipes).
pub fn stdio_transport(
    input: impl AsyncRead + Send + Unpin + 'static,
    output: impl AsyncWrite + Send + Unpin + 'static,
) -> StdioTransport<
    impl Sink<String, Error = io::Error> + Send + 'static,
    impl Stream<Item = io::Result<String>> + Send + 'static,
> {
    let (out_tx, out_rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(write_lines(output, out_rx));
    let (closed_tx, closed_rx) = oneshot::channel();
    let reader = Reader {
        input: BufReader::with_capacity(64 * 1024, input),
        replies: out_tx.clone(),
        closed: Some(closed_tx),
    };
    let incoming = futures_util::stream::unfold(reader, |mut reader| async move {
        let line = reader.next_line().await?;
        Some((line, reader))
    });
    let outgoing = futures_util::sink::unfold(out_tx, |tx, line: String| async move {
        tx.send(line)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed"))?;
        Ok::<_, io::Error>(tx)
    });
    StdioTransport {
        lines: Lines::new(Box::pin(outgoing), Box::pin(incoming)),
        input_closed: closed_rx,
        writer,
    }
}

async fn write_lines(output: impl AsyncWrite + Unpin, mut lines: mpsc::UnboundedReceiver<String>) {
    let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    while let Some(line) = lines.recv().await {
        if output.write_all(line.as_bytes()).await.is_err()
            || output.write_all(b"\n").await.is_err()
        {
            return;
        }
        // Flush when nothing else waits, so a burst goes out in few writes and a lone reply
        // goes out at once.
        if lines.is_empty() && output.flush().await.is_err() {
            return;
        }
    }
    let _ = output.flush().await;
}

struct Reader<I> {
    input: BufReader<I>,
    replies: mpsc::UnboundedSender<String>,
    closed: Option<oneshot::Sender<()>>,
}

/// One raw line as read: its bytes, or the fact that it was over the cap.
enum RawLine {
    Bytes(Vec<u8>),
    TooLong(usize),
}

impl<I: AsyncRead + Unpin> Reader<I> {
    /// The next line the crate may parse; `None` at the end of input. Lines that cannot be
    /// parsed are answered here and skipped.
    async fn next_line(&mut self) -> Option<io::Result<String>> {
        loop {
            let raw = match self.read_raw().await {
                Ok(Some(raw)) => raw,
                Ok(None) => {
                    self.input_ended();
                    return None;
                }
                Err(e) => {
                    tracing::warn!("stdin read failed: {e}; ending the ACP connection");
                    self.input_ended();
                    return None;
                }
            };
            match raw {
                RawLine::TooLong(length) => self.reply_error(
                    &Value::Null,
                    INVALID_REQUEST,
                    format!(
                        "a message of more than {MAX_LINE_BYTES} bytes ({length} read) was skipped; send smaller messages (attach large files as resource links)"
                    ),
                    "frameTooLarge",
                ),
                RawLine::Bytes(bytes) => {
                    if bytes.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    if let Some(line) = self.check(bytes) {
                        return Some(Ok(line));
                    }
                }
            }
        }
    }

    fn input_ended(&mut self) {
        if let Some(closed) = self.closed.take() {
            let _ = closed.send(());
        }
    }

    /// Read up to the next newline, keeping at most [`MAX_LINE_BYTES`].
    async fn read_raw(&mut self) -> io::Result<Option<RawLine>> {
        let mut line = Vec::new();
        let mut length = 0usize;
        let mut too_long = false;
        loop {
            let buffer = self.input.fill_buf().await?;
            if buffer.is_empty() {
                if length == 0 {
                    return Ok(None);
                }
                break;
            }
            let (chunk, found) = match memchr_newline(buffer) {
                Some(at) => (&buffer[..at], Some(at)),
                None => (buffer, None),
            };
            length += chunk.len();
            if !too_long {
                if line.len() + chunk.len() > MAX_LINE_BYTES {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            let consumed = found.map_or(chunk.len(), |at| at + 1);
            self.input.consume(consumed);
            if found.is_some() {
                break;
            }
        }
        Ok(Some(if too_long {
            RawLine::TooLong(length)
        } else {
            RawLine::Bytes(line)
        }))
    }

    /// The line as text the crate can parse, or `None` after answering why it cannot.
    fn check(&self, bytes: Vec<u8>) -> Option<String> {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                // The id, when the rest of the message is readable, so the client can match the
                // error to its request.
                let lossy = String::from_utf8_lossy(e.as_bytes());
                let id = request_id(&lossy);
                self.reply_error(
                    &id,
                    PARSE_ERROR,
                    format!(
                        "the message is not valid UTF-8 (at byte {at}); send JSON text encoded as UTF-8"
                    ),
                    "parseError",
                );
                return None;
            }
        };
        let text = replace_lone_surrogates(text);
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&text) {
            self.reply_error(
                &Value::Null,
                PARSE_ERROR,
                format!(
                    "the message ({} bytes) is not JSON: {e}; send one JSON-RPC object per line",
                    text.len()
                ),
                "parseError",
            );
            return None;
        }
        Some(text)
    }

    fn reply_error(&self, id: &Value, code: i64, message: String, kind: &str) {
        let reply = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message, "data": {"kind": kind}},
        });
        let _ = self.replies.send(reply.to_string());
    }
}

fn memchr_newline(buffer: &[u8]) -> Option<usize> {
    buffer.iter().position(|&b| b == b'\n')
}

/// The `id` of a request whose text is otherwise readable JSON (a string or a number), else null.
fn request_id(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => match map.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) if map.contains_key("method") => {
                id.clone()
            }
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// Replace every `\uD800`–`\uDFFF` escape that is not half of a proper pair with `\uFFFD`.
/// serde_json refuses them in strings, yet they are valid JSON (JavaScript's `JSON.stringify`
/// writes them for a string cut inside a pair), and one would make the whole message unreadable.
fn replace_lone_surrogates(text: String) -> String {
    if !text.contains("\\u") {
        return text;
    }
    let bytes = text.as_bytes();
    let hex_at = |at: usize| -> Option<u16> {
        let digits = bytes.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != b'\\' {
            index += 1;
            continue;
        }
        // An escaped backslash is two bytes; what follows it is plain text.
        if bytes.get(index + 1) != Some(&b'u') {
            index += 2;
            continue;
        }
        let Some(unit) = hex_at(index + 2) else {
            index += 2;
            continue;
        };
        let high = (0xD800..0xDC00).contains(&unit);
        let low = (0xDC00..0xE000).contains(&unit);
        if high {
            let paired = bytes.get(index + 6) == Some(&b'\\')
                && bytes.get(index + 7) == Some(&b'u')
                && hex_at(index + 8).is_some_and(|next| (0xDC00..0xE000).contains(&next));
            if paired {
                index += 12;
                continue;
            }
        }
        if high || low {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..index]);
            out.push_str("\\ufffd");
            copied = index + 6;
        }
        index += 6;
    }
    match out {
        None => text,
        Some(mut out) => {
            out.push_str(&text[copied..]);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters_and_pairs_stay() {
        let fixed = replace_lone_surrogates(
            r#"{"a":"x\ud800y","b":"\ud83d\ude00","c":"\\ud800","d":"\udc00"}"#.to_owned(),
        );
        let value: Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(value["a"], "x\u{fffd}y");
        assert_eq!(value["b"], "\u{1f600}");
        assert_eq!(value["c"], "\\ud800");
        assert_eq!(value["d"], "\u{fffd}");
    }

    #[test]
    fn an_id_is_read_only_from_a_request() {
        assert_eq!(request_id(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#), 7);
        assert_eq!(
            request_id(r#"{"jsonrpc":"2.0","id":"a","method":"x"}"#),
            "a"
        );
        assert_eq!(request_id(r#"{"jsonrpc":"2.0","id":7}"#), Value::Null);
        assert_eq!(request_id("not json"), Value::Null);
    }

    #[tokio::test]
    async fn bad_lines_are_answered_without_echo_and_good_ones_pass() {
        let input = [
            &b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"m\",\"params\":{\"t\":\"\xff\xfe\"}}\n"[..],
            b"this is not json at all, and it is long\n",
            b"\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"m\",\"params\":{\"t\":\"\\ud800\"}}\n",
        ]
        .concat();
        let (out_tx, mut out_rx) = mpsc::unbounded_channel();
        let (closed_tx, closed_rx) = oneshot::channel();
        let mut reader = Reader {
            input: BufReader::new(&input[..]),
            replies: out_tx,
            closed: Some(closed_tx),
        };
        let passed = reader.next_line().await.unwrap().unwrap();
        let value: Value = serde_json::from_str(&passed).unwrap();
        assert_eq!(value["id"], 4);
        assert_eq!(value["params"]["t"], "\u{fffd}");
        assert!(reader.next_line().await.is_none());
        closed_rx.await.expect("the end of input is reported");
        let first: Value = serde_json::from_str(&out_rx.recv().await.unwrap()).unwrap();
        assert_eq!(first["id"], 3);
        assert_eq!(first["error"]["code"], PARSE_ERROR);
        assert!(first["error"]["message"]
            .as_str()
            .unwrap()
            .contains("UTF-8"));
        let second: Value = serde_json::from_str(&out_rx.recv().await.unwrap()).unwrap();
        assert_eq!(second["id"], Value::Null);
        let message = second["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("not JSON") && !message.contains("long"),
            "{message}"
        );
    }
}
