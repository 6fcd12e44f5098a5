//! The SSE streams of MCP servers, parsed here (WHATWG rules) so that memory stays bounded:
//! no more than the configured limit of one event is ever held, and comment lines (keep-alives)
//! are dropped as they arrive rather than buffered.

use std::collections::VecDeque;
use std::pin::Pin;

use futures_util::stream::{self, BoxStream, Stream, StreamExt};
use rmcp::transport::streamable_http_client::SseError;
use sse_stream::Sse;

use super::{chain, McpHttpError};

/// The SSE events of a response body, parsed here (WHATWG rules) so that no more than `max`
/// bytes of one event are ever held: a line longer than that, or an event whose kept fields
/// add up to more, ends the stream with [`McpHttpError::TooLarge`].
pub(super) fn sse_events(
    response: reqwest::Response,
    max: usize,
    url: String,
) -> BoxStream<'static, Result<Sse, SseError>> {
    struct State {
        body: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
        decoder: SseDecoder,
        ready: VecDeque<Sse>,
        failure: Option<McpHttpError>,
        done: bool,
        url: String,
    }
    let state = State {
        body: Box::pin(response.bytes_stream()),
        decoder: SseDecoder::new(max),
        ready: VecDeque::new(),
        failure: None,
        done: false,
        url,
    };
    stream::unfold(state, move |mut state| async move {
        loop {
            // Events decoded before a failure are delivered first; then the failure; then the end.
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(event), state));
            }
            if let Some(failure) = state.failure.take() {
                state.done = true;
                return Some((Err(SseError::Body(Box::new(failure))), state));
            }
            if state.done {
                return None;
            }
            match state.body.next().await {
                Some(Ok(chunk)) => {
                    if state.decoder.feed(&chunk, &mut state.ready).is_err() {
                        state.failure = Some(McpHttpError::TooLarge {
                            url: state.url.clone(),
                            max,
                        });
                    }
                }
                Some(Err(source)) => {
                    let source = source.without_url();
                    state.failure = Some(McpHttpError::Body {
                        url: state.url.clone(),
                        detail: chain(&source),
                        source,
                    });
                }
                None => state.done = true,
            }
        }
    })
    .boxed()
}

/// An incremental SSE parser holding at most `max` bytes of the event being read.
#[derive(Debug)]
struct SseDecoder {
    max: usize,
    /// The current line, up to the end-of-line; never kept for comment lines.
    line: Vec<u8>,
    line_started: bool,
    in_comment: bool,
    /// A `\r` ended the last chunk: a `\n` starting the next one belongs to it.
    after_cr: bool,
    /// No line has ended yet (the place of a byte-order mark).
    at_start: bool,
    event: Sse,
    /// Bytes the event's fields hold so far.
    kept: usize,
}

/// The decoder's one failure: the event outgrew its limit.
#[derive(Debug)]
struct EventTooLarge;

impl SseDecoder {
    fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            line_started: false,
            in_comment: false,
            after_cr: false,
            at_start: true,
            event: Sse::default(),
            kept: 0,
        }
    }

    fn feed(&mut self, mut chunk: &[u8], out: &mut VecDeque<Sse>) -> Result<(), EventTooLarge> {
        while !chunk.is_empty() {
            if std::mem::take(&mut self.after_cr) && chunk[0] == b'\n' {
                chunk = &chunk[1..];
                continue;
            }
            match chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
                Some(end) => {
                    self.push(&chunk[..end])?;
                    self.after_cr = chunk[end] == b'\r';
                    chunk = &chunk[end + 1..];
                    self.end_line(out)?;
                }
                None => {
                    self.push(chunk)?;
                    chunk = &[];
                }
            }
        }
        Ok(())
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), EventTooLarge> {
        if bytes.is_empty() {
            return Ok(());
        }
        if !self.line_started {
            self.line_started = true;
            self.in_comment = bytes[0] == b':';
        }
        if self.in_comment {
            return Ok(());
        }
        if self.kept + self.line.len() + bytes.len() > self.max {
            return Err(EventTooLarge);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut VecDeque<Sse>) -> Result<(), EventTooLarge> {
        let was_comment = self.in_comment;
        let started = self.line_started;
        self.line_started = false;
        self.in_comment = false;
        if was_comment {
            return Ok(());
        }
        if !started {
            // A blank line dispatches the event. rmcp wants id-only events too (they carry the
            // id to resume from), so any event with a field is passed on.
            let event = std::mem::take(&mut self.event);
            self.kept = 0;
            if event != Sse::default() {
                out.push_back(event);
            }
            return Ok(());
        }
        let mut text: &[u8] = &self.line;
        if std::mem::take(&mut self.at_start) {
            // A byte-order mark opening the stream is no part of the first line (it is removed
            // here, at the line's end, since it may arrive split over chunks).
            text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        }
        let line = String::from_utf8_lossy(text).into_owned();
        self.line.clear();
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "data" => {
                // Data lines of one event join with a newline between them.
                match &mut self.event.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.event.data = Some(value.to_owned()),
                }
                self.kept += value.len() + 1;
            }
            "event" => {
                self.event.event = Some(value.to_owned());
                self.kept += value.len();
            }
            "id" if !value.contains('\0') => {
                self.event.id = Some(value.to_owned());
                self.kept += value.len();
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.event.retry = value.parse().ok();
            }
            _ => {}
        }
        if self.kept > self.max {
            return Err(EventTooLarge);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` in order and returns the events, or the failure.
    fn decode(max: usize, chunks: &[&[u8]]) -> Result<Vec<Sse>, EventTooLarge> {
        let mut decoder = SseDecoder::new(max);
        let mut out = VecDeque::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out)?;
        }
        Ok(out.into_iter().collect())
    }

    fn data(event: &Sse) -> &str {
        event.data.as_deref().unwrap_or("<none>")
    }

    #[test]
    fn events_survive_any_chunking_and_line_ending() {
        let text = b"\xEF\xBB\xBFevent: message\r\nid: 7\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n: keep-alive\n\ndata: two\r\rretry: 250\nid\n\n";
        // Every split point, including one between a \r and its \n.
        for at in 0..text.len() {
            let events = decode(1024, &[&text[..at], &text[at..]]).unwrap();
            assert_eq!(events.len(), 3, "split at {at}: {events:?}");
            assert_eq!(events[0].event.as_deref(), Some("message"));
            assert_eq!(events[0].id.as_deref(), Some("7"));
            assert_eq!(data(&events[0]), "{\"a\":\n1}");
            assert_eq!(data(&events[1]), "two");
            // An id-only event is passed on: rmcp resumes from its id.
            assert_eq!(events[2].retry, Some(250));
            assert_eq!(events[2].id.as_deref(), Some(""));
            assert_eq!(events[2].data, None);
        }
    }

    #[test]
    fn an_unfinished_event_is_not_dispatched() {
        let events = decode(1024, &[b"data: one\n\ndata: half"]).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(data(&events[0]), "one");
    }

    #[test]
    fn an_event_over_the_limit_fails_however_it_arrives() {
        // Many data lines, one long line without an end, and one byte at a time.
        let many = b"data: 0123456789\n".repeat(10);
        assert!(decode(100, &[&many]).is_err());
        let long = vec![b'x'; 200];
        assert!(decode(100, &[b"data: ", &long]).is_err());
        let bytes: Vec<&[u8]> = many.chunks(1).collect();
        assert!(decode(100, &bytes).is_err());
        // Under the limit, the same event passes, and the count restarts with each event.
        let fits = b"data: 0123456789\n\n".repeat(30);
        assert_eq!(decode(100, &[&fits]).unwrap().len(), 30);
    }

    #[test]
    fn comments_are_never_buffered() {
        // A keep-alive comment far longer than the limit costs nothing and breaks nothing.
        let comment = vec![b'z'; 10_000];
        let events = decode(64, &[b":", &comment, &comment, b"\ndata: after\n\n"]).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(data(&events[0]), "after");
    }
}
