//! Requests as shared bytes: each projected message serialized once into one vendor's JSON
//! items, and a request body written from those pieces without copying the history.
//!
//! Why: a turn's request carries the whole conversation. Re-projecting and re-serializing it for
//! every request made each turn cost time and memory in proportion to the history (15.8 ms to
//! the first request byte at 5,000 messages, `cargo run --release --example bench -- history`,
//! 2.0–3.2 ms with the cache). The engine's outbound cache
//! (`engine::outbound::cache`) keeps the [`EncodedMessage`] of every message it has sent, and
//! a vendor module only writes what is new plus its short head (model, tools, system prompt).
//!
//! The body is streamed to the HTTP client in chunks of at most [`CHUNK_BYTES`] with an exact
//! `Content-Length`, so a request never needs one contiguous copy of the conversation either.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use serde_json::{Map, Value};

/// The largest piece the body stream hands to the HTTP client at once.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// What a piece of a vendor message is, for the rules a vendor applies to the end of a request
/// (Anthropic's cache breakpoint and thinking check, Gemini's signatures of the current turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// A whole vendor message (OpenAI's chat messages are never merged).
    Whole,
    Text,
    /// A signed thinking block (Anthropic).
    Thinking,
    /// A tool call (Anthropic `tool_use`, Gemini `functionCall`); `signed` says whether it
    /// carries a thought signature (Gemini).
    Call {
        signed: bool,
    },
    /// A tool result (Anthropic `tool_result`, Gemini `functionResponse`).
    Result,
    /// An image or document.
    Media,
}

/// One serialized piece of a vendor message: an OpenAI message, an Anthropic content block, a
/// Gemini part.
#[derive(Debug, Clone)]
pub struct EncodedItem {
    pub kind: ItemKind,
    pub json: Arc<str>,
}

/// One projected message in one vendor's wire format, serialized once.
///
/// Vendors that want alternating roles (Anthropic, Gemini) merge the items of consecutive
/// messages of one role into one vendor message when they write the body.
#[derive(Debug, Clone)]
pub struct EncodedMessage {
    /// The vendor's role (`user`, `assistant`, `model`, `tool`).
    pub role: &'static str,
    /// Empty for a message the vendor does not send (an assistant message with nothing in it).
    pub items: Vec<EncodedItem>,
}

impl EncodedMessage {
    /// Bytes this message holds, for the cache's accounting.
    pub fn bytes(&self) -> usize {
        self.items.iter().map(|i| i.json.len()).sum()
    }
}

/// How a message is written: the choices a vendor's encoding depends on besides the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageForm {
    /// The request declares no tools (a compaction's summarizing request): calls and results
    /// are written out as text.
    pub calls_as_text: bool,
}

/// An item from a JSON value.
pub fn item(kind: ItemKind, value: &Value) -> EncodedItem {
    EncodedItem {
        kind,
        json: Arc::from(value.to_string()),
    }
}

/// One vendor message of a vendor that wants alternating roles: a role and the items of the
/// consecutive encoded messages of that role.
pub type RoleMessage = (&'static str, Vec<EncodedItem>);

/// Merge consecutive messages of one role into one vendor message (Anthropic, Gemini), skipping
/// empty ones (a stop before any text has nothing to say, and both APIs refuse empty content).
/// Consecutive tool results, and a steering message after them, then share one user message,
/// results first.
pub fn merge_by_role(messages: &[Arc<EncodedMessage>]) -> Vec<RoleMessage> {
    let mut merged: Vec<RoleMessage> = Vec::new();
    for message in messages.iter().filter(|m| !m.items.is_empty()) {
        match merged.last_mut() {
            Some((role, items)) if *role == message.role => {
                items.extend(message.items.iter().cloned())
            }
            _ => merged.push((message.role, message.items.clone())),
        }
    }
    merged
}

enum Segment {
    Static(&'static str),
    Shared(Arc<str>),
}

impl Segment {
    fn as_bytes(&self) -> &[u8] {
        match self {
            Segment::Static(s) => s.as_bytes(),
            Segment::Shared(s) => s.as_bytes(),
        }
    }
}

/// A request body being written: static text, and pieces shared with the outbound cache.
#[derive(Default)]
pub struct Body {
    segments: Vec<Segment>,
    len: usize,
}

impl Body {
    /// A body that opens with `head`'s fields; the caller then writes the last field, the
    /// conversation, with [`Body::field`] and closes it with [`Body::close`]. `pieces` is about
    /// how many pieces the conversation will add.
    ///
    /// The conversation comes last on purpose: everything before it (model, tools, system
    /// prompt) is the same from one request to the next, and the conversation only grows at
    /// its end, so consecutive requests share one long byte prefix, as providers' prompt
    /// caches do.
    pub fn with_head(head: Map<String, Value>, pieces: usize) -> Body {
        // Room for every piece up front: a long conversation is thousands of them.
        let mut body = Body {
            segments: Vec::with_capacity(pieces + 16),
            len: 0,
        };
        let text = Value::Object(head).to_string();
        // `{…}`: drop the closing brace so more fields can follow.
        let open = text.strip_suffix('}').unwrap_or("{").to_owned();
        let has_fields = open.len() > 1;
        body.push_owned(open);
        if has_fields {
            body.push_static(",");
        }
        body
    }

    /// `"name":` (the first field's comma, if any, was written by [`Body::with_head`]).
    pub fn field(&mut self, name: &'static str) {
        self.push_static("\"");
        self.push_static(name);
        self.push_static("\":");
    }

    pub fn close(&mut self) {
        self.push_static("}");
    }

    pub fn push_static(&mut self, text: &'static str) {
        self.len += text.len();
        self.segments.push(Segment::Static(text));
    }

    pub fn push_shared(&mut self, text: &Arc<str>) {
        self.len += text.len();
        self.segments.push(Segment::Shared(Arc::clone(text)));
    }

    pub fn push_owned(&mut self, text: String) {
        self.len += text.len();
        self.segments.push(Segment::Shared(Arc::from(text)));
    }

    pub fn push_json(&mut self, value: &Value) {
        self.push_owned(value.to_string());
    }

    /// Items separated by commas.
    pub fn push_items<'a>(&mut self, items: impl IntoIterator<Item = &'a Arc<str>>) {
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.push_static(",");
            }
            self.push_shared(item);
        }
    }

    /// `[{"role":…,"<items_key>":[…]},…]`: merged vendor messages with their items under
    /// `items_key` (`content` for Anthropic, `parts` for Gemini).
    pub fn push_role_messages(&mut self, messages: &[RoleMessage], items_key: &'static str) {
        self.push_static("[");
        for (i, (role, items)) in messages.iter().enumerate() {
            if i > 0 {
                self.push_static(",");
            }
            self.push_static("{\"role\":\"");
            self.push_static(role);
            self.push_static("\",\"");
            self.push_static(items_key);
            self.push_static("\":[");
            self.push_items(items.iter().map(|i| &i.json));
            self.push_static("]}");
        }
        self.push_static("]");
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole body in one buffer (tests, and reading a request back as JSON).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for segment in &self.segments {
            out.extend_from_slice(segment.as_bytes());
        }
        out
    }

    /// The body as JSON (tests; a body is always valid JSON).
    pub fn to_json(&self) -> Value {
        serde_json::from_slice(&self.to_bytes()).unwrap_or(Value::Null)
    }

    /// The body for reqwest: streamed in chunks of at most [`CHUNK_BYTES`], with its length for
    /// the `Content-Length` header (set by the caller; with it the client sends no chunked
    /// encoding, which some OpenAI-compatible servers refuse).
    pub fn into_http(self) -> (reqwest::Body, usize) {
        let len = self.len;
        let chunks = Chunks {
            segments: self.segments.into_iter(),
            partial: None,
        };
        (
            reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)),
            len,
        )
    }
}

/// Copies segments into chunks; one chunk is alive at a time.
struct Chunks {
    segments: std::vec::IntoIter<Segment>,
    /// A segment larger than the room left in the last chunk, and how much of it was sent.
    partial: Option<(Segment, usize)>,
}

impl Iterator for Chunks {
    type Item = Result<Bytes, std::io::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut chunk = BytesMut::new();
        loop {
            let (segment, offset) = match self.partial.take() {
                Some(partial) => partial,
                None => match self.segments.next() {
                    Some(segment) => (segment, 0),
                    None => break,
                },
            };
            let bytes = &segment.as_bytes()[offset..];
            if chunk.is_empty() {
                chunk.reserve(CHUNK_BYTES.min(bytes.len().max(4096)));
            }
            let room = CHUNK_BYTES - chunk.len();
            if bytes.len() <= room {
                chunk.extend_from_slice(bytes);
            } else {
                chunk.extend_from_slice(&bytes[..room]);
                self.partial = Some((segment, offset + room));
            }
            if chunk.len() >= CHUNK_BYTES {
                break;
            }
        }
        (!chunk.is_empty()).then(|| Ok(chunk.freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_body_streams_in_bounded_chunks_that_add_up_to_its_bytes() {
        let mut head = Map::new();
        head.insert("model".into(), json!("m"));
        let mut body = Body::with_head(head, 8);
        body.field("messages");
        body.push_static("[");
        let big: Arc<str> = Arc::from(format!("\"{}\"", "x".repeat(3 * CHUNK_BYTES + 17)));
        let small: Arc<str> = Arc::from("\"y\"");
        body.push_items([&small, &big, &small]);
        body.push_static("]");
        body.close();
        let expected = body.to_bytes();
        assert_eq!(expected.len(), body.len());
        let parsed: Value = serde_json::from_slice(&expected).unwrap();
        assert_eq!(parsed["model"], "m");
        assert_eq!(parsed["messages"][2], "y");
        let chunks: Vec<Bytes> = Chunks {
            segments: body.segments.into_iter(),
            partial: None,
        }
        .map(Result::unwrap)
        .collect();
        assert!(chunks
            .iter()
            .all(|c| c.len() <= CHUNK_BYTES && !c.is_empty()));
        assert!(chunks.len() >= 4);
        assert_eq!(chunks.concat(), expected);
    }

    #[test]
    fn an_empty_head_opens_the_object_without_a_comma() {
        let mut body = Body::with_head(Map::new(), 0);
        body.field("contents");
        body.push_static("[]");
        body.close();
        assert_eq!(body.to_bytes(), b"{\"contents\":[]}");
    }
}
