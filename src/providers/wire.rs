//! Requests as shared bytes: each projected message serialized once into one vendor's JSON
//! items, and a request body written from those pieces without copying the history.
//!
//! Why: a turn's request carries the whole conversation. Re-projecting and re-serializing it for
//! every request made each turn cost time and memory in proportion to the history (15.8 ms to
//! the first request byte at 5,000 messages, `cargo run --release --example bench -- history`;
//! 2.7–2.9 ms with the cache shared by pointer, three runs on 2026-12-07). The engine's outbound
//! cache (`engine::outbound::cache`) keeps the [`EncodedMessage`] of every message it has sent,
//! and a vendor module only writes what is new plus its short head (model, tools, system prompt).
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

/// The encoded start of a conversation, shared by the outbound cache and the requests it
/// starts.
///
/// A request holds it by pointer (`Arc<EncodedList>`), so handing the cached start to a
/// request costs nothing however long the history; the cache appends in place
/// (`Arc::make_mut`) once the previous request is gone, which it is by the time the next one
/// is built (a list still shared is copied, as every request did before). The item count and
/// the JSON bytes are kept as messages are pushed, so a body knows its `Content-Length`
/// without walking the list: a body walks it only while streaming it (see [`Body::push_run`]).
#[derive(Debug, Clone, Default)]
pub struct EncodedList {
    messages: Vec<EncodedMessage>,
    items: usize,
    json_bytes: usize,
}

impl EncodedList {
    pub fn push(&mut self, message: EncodedMessage) {
        self.items += message.items.len();
        self.json_bytes += message.bytes();
        self.messages.push(message);
    }

    pub fn messages(&self) -> &[EncodedMessage] {
        &self.messages
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Bytes of JSON the messages hold.
    pub fn bytes(&self) -> usize {
        self.json_bytes
    }

    /// Grow by an eighth at a time, like the history it mirrors, rather than double.
    pub fn reserve_for(&mut self, more: usize) {
        let spare = self.messages.capacity() - self.messages.len();
        if spare < more {
            let wanted = more.max(self.messages.len() / 8 + 16);
            self.messages.reserve_exact(wanted);
        }
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
pub fn merge_by_role<'a>(
    messages: impl IntoIterator<Item = &'a EncodedMessage>,
) -> Vec<RoleMessage> {
    let mut merged: Vec<RoleMessage> = Vec::new();
    for message in messages.into_iter().filter(|m| !m.items.is_empty()) {
        match merged.last_mut() {
            Some((role, items)) if *role == message.role => {
                items.extend(message.items.iter().cloned())
            }
            _ => merged.push((message.role, message.items.clone())),
        }
    }
    merged
}

#[derive(Clone)]
enum Segment {
    Static(&'static str),
    Shared(Arc<str>),
    /// Every item of a shared list, separated by commas, after a comma of its own when the
    /// flag says so (and the list has an item).
    Run(Arc<EncodedList>, bool),
}

/// A request body being written: static text, pieces shared with the outbound cache, and runs
/// of the cache's list copied only while the body streams.
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

    /// Every item of `list`, separated by commas (and after one when `leading_comma` and the
    /// list has an item): one segment whatever the list's length, walked while the body
    /// streams, so building a request does not touch the messages the cache already holds.
    /// Returns whether an item was written.
    pub fn push_run(&mut self, list: &Arc<EncodedList>, leading_comma: bool) -> bool {
        if list.items == 0 {
            return false;
        }
        self.len += list.json_bytes + list.items - 1 + usize::from(leading_comma);
        self.segments
            .push(Segment::Run(Arc::clone(list), leading_comma));
        true
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
        for chunk in Chunks::new(self.segments.clone(), self.len) {
            out.extend_from_slice(&chunk.unwrap_or_default());
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
        let chunks = Chunks::new(self.segments, len);
        (
            reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)),
            len,
        )
    }
}

/// Copies segments into chunks; one chunk is alive at a time.
struct Chunks {
    segments: std::vec::IntoIter<Segment>,
    /// The segment being copied, and where in it.
    current: Option<(Segment, Cursor)>,
    /// Bytes not yet handed out (to size a chunk's buffer).
    left: usize,
}

/// A position in a segment: a byte offset in text, or in a run the next item (and the offset
/// in it) with whether the comma before it is still to be written.
#[derive(Default)]
struct Cursor {
    offset: usize,
    message: usize,
    item: usize,
    comma_pending: bool,
}

impl Chunks {
    fn new(segments: Vec<Segment>, len: usize) -> Chunks {
        Chunks {
            segments: segments.into_iter(),
            current: None,
            left: len,
        }
    }
}

impl Iterator for Chunks {
    type Item = Result<Bytes, std::io::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut chunk = BytesMut::with_capacity(CHUNK_BYTES.min(self.left));
        while chunk.len() < CHUNK_BYTES {
            let (segment, cursor) = match &mut self.current {
                Some(current) => current,
                None => match self.segments.next() {
                    Some(segment) => {
                        let cursor = Cursor {
                            comma_pending: matches!(segment, Segment::Run(_, true)),
                            ..Cursor::default()
                        };
                        self.current.insert((segment, cursor))
                    }
                    None => break,
                },
            };
            let done = match segment {
                Segment::Static(text) => copy_from(text.as_bytes(), &mut cursor.offset, &mut chunk),
                Segment::Shared(text) => copy_from(text.as_bytes(), &mut cursor.offset, &mut chunk),
                Segment::Run(list, _) => copy_run(list, cursor, &mut chunk),
            };
            if done {
                self.current = None;
            }
        }
        self.left = self.left.saturating_sub(chunk.len());
        (!chunk.is_empty()).then(|| Ok(chunk.freeze()))
    }
}

/// Copy what fits of `bytes[*offset..]`; true once all of it is copied.
fn copy_from(bytes: &[u8], offset: &mut usize, chunk: &mut BytesMut) -> bool {
    let rest = &bytes[*offset..];
    let taken = rest.len().min(CHUNK_BYTES - chunk.len());
    chunk.extend_from_slice(&rest[..taken]);
    *offset += taken;
    *offset == bytes.len()
}

/// Copy what fits of a run from `cursor`; true once its last item is copied.
fn copy_run(list: &EncodedList, cursor: &mut Cursor, chunk: &mut BytesMut) -> bool {
    let messages = list.messages();
    loop {
        while cursor.message < messages.len() && cursor.item >= messages[cursor.message].items.len()
        {
            cursor.message += 1;
            cursor.item = 0;
        }
        let Some(message) = messages.get(cursor.message) else {
            return true;
        };
        if chunk.len() >= CHUNK_BYTES {
            return false;
        }
        if cursor.comma_pending {
            chunk.extend_from_slice(b",");
            cursor.comma_pending = false;
            continue;
        }
        if !copy_from(
            message.items[cursor.item].json.as_bytes(),
            &mut cursor.offset,
            chunk,
        ) {
            return false;
        }
        cursor.offset = 0;
        cursor.item += 1;
        cursor.comma_pending = true;
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
        let chunks: Vec<Bytes> = Chunks::new(body.segments, body.len)
            .map(Result::unwrap)
            .collect();
        assert!(chunks
            .iter()
            .all(|c| c.len() <= CHUNK_BYTES && !c.is_empty()));
        assert!(chunks.len() >= 4);
        assert_eq!(chunks.concat(), expected);
    }

    /// A run of the cache's list streams exactly what writing its items one by one gives,
    /// across chunk boundaries, over messages with no items, with and without a leading comma.
    #[test]
    fn a_run_streams_the_same_bytes_as_its_items_written_one_by_one() {
        let text = |t: &str| item(ItemKind::Whole, &json!({"role": "user", "content": t}));
        let mut list = EncodedList::default();
        for n in 0..40 {
            let items = match n % 4 {
                0 => Vec::new(),
                1 => vec![text(&"z".repeat(CHUNK_BYTES / 3 + n))],
                2 => vec![text("a"), text(&format!("b{n}"))],
                _ => vec![text(&"q".repeat(2 * CHUNK_BYTES + 5))],
            };
            list.push(EncodedMessage {
                role: "user",
                items,
            });
        }
        let list = Arc::new(list);
        let all: Vec<Arc<str>> = list
            .messages()
            .iter()
            .flat_map(|m| m.items.iter().map(|i| i.json.clone()))
            .collect();
        for leading in [false, true] {
            let mut head = Map::new();
            head.insert("model".into(), json!("m"));
            let (mut by_run, mut by_items) =
                (Body::with_head(head.clone(), 0), Body::with_head(head, 0));
            for body in [&mut by_run, &mut by_items] {
                body.field("messages");
                body.push_static("[");
                if leading {
                    body.push_static("\"system\"");
                }
            }
            assert!(by_run.push_run(&list, leading));
            if leading {
                by_items.push_static(",");
            }
            by_items.push_items(&all);
            let empty = Arc::new(EncodedList::default());
            assert!(
                !by_run.push_run(&empty, true),
                "an empty run writes nothing"
            );
            for body in [&mut by_run, &mut by_items] {
                body.push_static("]");
                body.close();
            }
            let expected = by_items.to_bytes();
            assert_eq!(by_run.len(), expected.len());
            let chunks: Vec<Bytes> = Chunks::new(by_run.segments.clone(), by_run.len)
                .map(Result::unwrap)
                .collect();
            assert!(chunks
                .iter()
                .all(|c| !c.is_empty() && c.len() <= CHUNK_BYTES));
            assert_eq!(chunks.concat(), expected);
            let parsed: Value = serde_json::from_slice(&expected).unwrap();
            assert_eq!(
                parsed["messages"].as_array().unwrap().len(),
                all.len() + usize::from(leading)
            );
        }
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
