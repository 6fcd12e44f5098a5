//! Fitting a JSON value under a byte budget by cutting its longest strings, each cut saying
//! how much it left out.
//!
//! Nothing tandem sends may exceed the frame cap it advertises ([`MAX_FRAME_BYTES`]), yet a
//! proposed change of an 8 MiB file carries the file twice in its diff plus the unified diff,
//! and a long session's history is far larger than one frame. Whoever builds such a message
//! fits its large parts here; the history itself, what the model sees and what is written to
//! disk are never cut (only what is shown).
//!
//! The cut keeps the head of each string (whole UTF-8 characters) and appends
//! [`CUT_NOTE_PREFIX`]`<n> bytes not shown …]`, so a reader sees that and how much is missing.

use serde::Serialize;
use serde_json::Value;

/// The most bytes of one frame's body, in both directions (see protocol.md, Transport).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The most bytes of one `approvalRequested`: it is sent as an event and again in
/// `session/load`'s `pending`, beside a page of messages.
pub const APPROVAL_DISPLAY_BYTES: usize = 6 * 1024 * 1024;

/// The most bytes of one entry of `session/load`'s `messages`: a page holds at least one
/// beside the head (with an approval at its largest) under the frame cap.
pub const LOAD_ENTRY_BYTES: usize = 4 * 1024 * 1024;

/// How every cut note begins; a client may search for it.
pub const CUT_NOTE_PREFIX: &str = "\n[tandem: ";

/// Strings shorter than this are never cut: cutting them frees little and destroys ids,
/// paths and names.
const SHORTEST_CUT: usize = 256;

/// Cut the longest strings of `value` until its serialized form is at most `budget` bytes.
/// Returns how many bytes were cut in all (0 when it already fit). A value made of so many
/// short strings that it cannot be fit this way is left as fitted as it gets; callers that
/// need a hard bound check [`serialized_len`] after.
pub fn fit_value(value: &mut Value, budget: usize) -> usize {
    let mut cut_total = 0;
    // Each pass cuts by the current excess; escapes (a `"` or a control character counts for
    // more than one byte once serialized) and the notes themselves can leave a little over,
    // which the next pass takes. Three passes are plenty; the bound keeps a hostile shape from
    // looping.
    for _ in 0..4 {
        let size = serialized_len(value);
        if size <= budget {
            break;
        }
        let cut = cut_longest(value, size - budget);
        if cut == 0 {
            break;
        }
        cut_total += cut;
    }
    cut_total
}

/// The length of `value` serialized as compact JSON, without building the text.
pub fn serialized_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// The last line of defence before a message leaves: a body over [`MAX_FRAME_BYTES`] has its
/// longest strings cut to fit. The builders of large messages (approvals, `session/load`) fit
/// their parts with intent, so this only catches what slipped through (an event carrying a
/// huge applied diff). A message that cannot be fit (so many short strings that cutting the
/// long ones is not enough) becomes an error reply when it had an id, and is dropped with a
/// log line when it was a notification: a frame over the advertised cap would make a client
/// drop the connection, which loses more.
pub fn fit_message(body: Vec<u8>) -> Option<Vec<u8>> {
    if body.len() <= MAX_FRAME_BYTES {
        return Some(body);
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
        tracing::error!(
            bytes = body.len(),
            "an unparsable oversized message was not sent"
        );
        return None;
    };
    drop(body);
    // Room for the cut notes' own bytes and for escapes the first pass underestimates.
    let cut = fit_value(&mut value, MAX_FRAME_BYTES - 64 * 1024);
    if serialized_len(&value) <= MAX_FRAME_BYTES {
        tracing::warn!(cut, "a message over the frame cap was cut to fit");
        return serde_json::to_vec(&value).ok();
    }
    match value.get("id") {
        Some(id) if value.get("method").is_none() => {
            let error = super::RpcErrorObject::new(
                super::ErrorKind::Internal,
                format!("the reply would exceed the {MAX_FRAME_BYTES}-byte frame cap even with its long values cut; ask for less (for session/load, page with `cursor`)"),
            );
            let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error});
            serde_json::to_vec(&reply).ok()
        }
        _ => {
            tracing::error!(
                "a notification over the frame cap could not be cut to fit and was not sent"
            );
            None
        }
    }
}

/// Free at least `excess` bytes by cutting strings, longest first. Returns the bytes cut.
fn cut_longest(value: &mut Value, excess: usize) -> usize {
    let mut lengths = Vec::new();
    collect_lengths(value, &mut lengths);
    lengths.retain(|&len| len >= SHORTEST_CUT);
    if lengths.is_empty() {
        return 0;
    }
    lengths.sort_unstable_by(|a, b| b.cmp(a));
    // Cut every string down to one common length `keep`: the largest `keep` that frees
    // enough. Cutting the longest first and evenly keeps some of each large part (of a diff's
    // old text, new text and unified diff alike) instead of erasing one of them.
    let note_room = 96;
    let keep = level_for(&lengths, excess, note_room);
    let mut cut = 0;
    cut_to(value, keep, &mut cut);
    cut
}

/// The largest length `keep` (at least [`SHORTEST_CUT`] / 2) such that cutting every string
/// longer than it down to it (plus a note of `note_room` bytes) frees `excess` bytes.
fn level_for(sorted_desc: &[usize], excess: usize, note_room: usize) -> usize {
    let floor = SHORTEST_CUT / 2;
    let freed_at = |keep: usize| -> usize {
        sorted_desc
            .iter()
            .take_while(|&&len| len > keep + note_room)
            .map(|&len| len - keep - note_room)
            .sum()
    };
    let (mut low, mut high) = (floor, sorted_desc[0]);
    if freed_at(low) < excess {
        return low;
    }
    // Binary search for the largest keep that still frees enough.
    while low < high {
        let middle = low + (high - low).div_ceil(2);
        if freed_at(middle) >= excess {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    low
}

fn collect_lengths(value: &Value, out: &mut Vec<usize>) {
    match value {
        Value::String(s) => out.push(s.len()),
        Value::Array(items) => items.iter().for_each(|v| collect_lengths(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_lengths(v, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn cut_to(value: &mut Value, keep: usize, cut: &mut usize) {
    match value {
        Value::String(s) if s.len() >= SHORTEST_CUT && s.len() > keep + 96 => {
            let mut at = keep;
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            let removed = s.len() - at;
            s.truncate(at);
            s.push_str(&format!(
                "{CUT_NOTE_PREFIX}{removed} bytes not shown: too large for one message]"
            ));
            *cut += removed;
        }
        Value::Array(items) => items.iter_mut().for_each(|v| cut_to(v, keep, cut)),
        Value::Object(map) => map.values_mut().for_each(|v| cut_to(v, keep, cut)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_that_fits_is_left_alone() {
        let mut value = json!({"a": "x".repeat(1000), "b": [1, 2, 3]});
        let before = value.clone();
        assert_eq!(fit_value(&mut value, 2000), 0);
        assert_eq!(value, before);
    }

    #[test]
    fn the_longest_strings_are_cut_evenly_with_a_note_and_short_ones_kept() {
        let mut value = json!({
            "path": "src/main.rs",
            "oldText": "o".repeat(300_000),
            "newText": "n".repeat(200_000),
            "unified": "u".repeat(500_000),
        });
        let cut = fit_value(&mut value, 100_000);
        assert!(
            serialized_len(&value) <= 100_000,
            "{}",
            serialized_len(&value)
        );
        assert!(cut >= 900_000, "{cut}");
        assert_eq!(value["path"], "src/main.rs");
        for key in ["oldText", "newText", "unified"] {
            let text = value[key].as_str().unwrap();
            assert!(text.contains(CUT_NOTE_PREFIX), "{key}");
            assert!(text.contains("bytes not shown"), "{key}");
            // Each part keeps a share of its head.
            assert!(text.len() > 20_000, "{key}: {}", text.len());
        }
    }

    #[test]
    fn cuts_fall_on_character_boundaries_and_count_escapes() {
        let mut value = json!(["é\"".repeat(100_000)]);
        fit_value(&mut value, 10_000);
        assert!(
            serialized_len(&value) <= 10_000,
            "{}",
            serialized_len(&value)
        );
        // Still valid UTF-8 and JSON, round trip included.
        let text = serde_json::to_string(&value).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn an_oversized_message_is_cut_below_the_frame_cap() {
        let body = serde_json::to_vec(&json!({
            "jsonrpc": "2.0",
            "method": "session/event",
            "params": {"event": {"diff": "d".repeat(MAX_FRAME_BYTES + 10)}},
        }))
        .unwrap();
        let fitted = fit_message(body).expect("cut to fit");
        assert!(fitted.len() <= MAX_FRAME_BYTES);
        let value: Value = serde_json::from_slice(&fitted).unwrap();
        assert_eq!(value["method"], "session/event");
        assert!(value["params"]["event"]["diff"]
            .as_str()
            .unwrap()
            .contains("bytes not shown"));
    }

    #[test]
    fn a_reply_that_cannot_be_cut_becomes_an_error_with_its_id() {
        // Many short strings: nothing is long enough to cut.
        let items: Vec<String> = (0..MAX_FRAME_BYTES / 100)
            .map(|i| format!("{i:0>120}"))
            .collect();
        let body =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "result": {"items": items}}))
                .unwrap();
        let fitted = fit_message(body).expect("an error reply");
        let value: Value = serde_json::from_slice(&fitted).unwrap();
        assert_eq!(value["id"], 7);
        assert!(value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("frame cap"));
    }
}
