//! One session's events on the native face, fanned out to every connection that holds or
//! attached to the session (DESIGN 7.5): the stdio client that created it and any number of
//! WebSocket clients.
//!
//! The session's `Emitter` calls [`SessionEvents::emit`] once per event, in `seq` order and
//! never two at a time; the message is serialized once and handed to each subscriber's
//! connection under one lock, so every subscriber sees the same `seq` stream in the same order.
//! `session/attach` ([`SessionEvents::attach`]) replays from a client's `fromSeq` and then
//! streams live without a gap or a repeat: the subscriber is registered, in one critical section
//! with a snapshot of the recent window, as *replaying* (live events wait in its own buffer),
//! the stored events older than the window are read from the store page by page and sent, then
//! the window and the buffer, and only then does it turn live.
//!
//! Invariants: a subscriber's messages leave in `seq` order with none repeated; the per-event
//! work for a process that does not listen is one serialization and one send (the window is
//! kept only when a client may attach); memory per subscriber is bounded by dropping streamed
//! pieces past `outbound_buffer_bytes` of backlog, accounted for by one `streamTruncated`.
//! Does not: decide who may attach (the listener's handshake does), or read frames.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use crate::protocol::Event;
use crate::session::EventSink;
use crate::store::{Store, StoreError};

use super::rpc;
use super::Outbound;

/// One connection of this process (stdio or a WebSocket client), for telling subscribers apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ConnectionId(pub(crate) u64);

/// How many recent messages a session keeps for clients that attach again, in bytes: a client
/// that reconnects within this much of the stream gets every event it missed, streamed pieces
/// included; one that was away longer gets the stored events (the pieces' text is in the stored
/// message that follows them).
pub(crate) const RECENT_WINDOW_BYTES: usize = 1024 * 1024;

/// Stored events read per store query while replaying, so a replay from the start of a long
/// session never holds all of it.
const REPLAY_PAGE: usize = 512;

/// The native face's `EventSink` for one session.
pub(crate) struct SessionEvents {
    /// `outbound_buffer_bytes`: past this backlog a subscriber's streamed pieces are dropped.
    cap: usize,
    fanout: Mutex<Fanout>,
}

struct Fanout {
    subscribers: Vec<Subscriber>,
    /// The last messages sent, oldest first; `None` when nobody can attach (no listener).
    recent: Option<RecentWindow>,
}

/// Every message of the session from `messages.front()` on, up to [`RECENT_WINDOW_BYTES`].
struct RecentWindow {
    messages: VecDeque<(u64, Vec<u8>)>,
    bytes: usize,
}

impl RecentWindow {
    fn push(&mut self, seq: u64, message: &[u8]) {
        self.bytes += message.len();
        self.messages.push_back((seq, message.to_vec()));
        while self.bytes > RECENT_WINDOW_BYTES && self.messages.len() > 1 {
            if let Some((_, old)) = self.messages.pop_front() {
                self.bytes -= old.len();
            }
        }
    }
}

struct Subscriber {
    connection: ConnectionId,
    out: Outbound,
    /// Live events that arrived while this subscriber's replay was being sent; `None` once live.
    replay_buffer: Option<Vec<(u64, Vec<u8>)>>,
    buffered_bytes: usize,
    dropped: Option<DroppedRun>,
}

/// What a subscriber needs to know of the event it is handed.
#[derive(Clone, Copy)]
struct Emitted<'a> {
    session_id: &'a str,
    seq: u64,
    turn_id: Option<&'a str>,
    /// A streamed piece (delta, shell output): the only kind that may be dropped.
    piece: bool,
}

/// Streamed pieces dropped in a row for a client that did not read.
struct DroppedRun {
    from_seq: u64,
    last_seq: u64,
    turn_id: Option<String>,
    count: u64,
    bytes: u64,
}

impl Subscriber {
    fn new(connection: ConnectionId, out: Outbound, replaying: bool) -> Self {
        Subscriber {
            connection,
            out,
            replay_buffer: replaying.then(Vec::new),
            buffered_bytes: 0,
            dropped: None,
        }
    }

    fn backlog(&self) -> usize {
        self.out.backlog_bytes() + self.buffered_bytes
    }

    /// Send (or buffer, while replaying) one message. A client that stops reading would make
    /// tandem hold everything it sends (a command that floods output: gigabytes), so past `cap`
    /// of backlog streamed pieces are dropped; the first message after them is preceded by one
    /// `streamTruncated` standing for them, numbered with the last dropped piece's `seq`, so
    /// every `seq` is still accounted for. Stored events are never dropped: the assistant
    /// message and the call's final update carry what the pieces did.
    fn deliver(&mut self, event: Emitted<'_>, message: Vec<u8>, cap: usize) {
        let Emitted {
            session_id,
            seq,
            turn_id,
            piece,
        } = event;
        if piece && self.backlog() > cap {
            let run = self.dropped.get_or_insert(DroppedRun {
                from_seq: seq,
                last_seq: seq,
                turn_id: None,
                count: 0,
                bytes: 0,
            });
            run.last_seq = seq;
            run.turn_id = turn_id.map(str::to_owned);
            run.count += 1;
            run.bytes += message.len() as u64;
            return;
        }
        if let Some(run) = self.dropped.take() {
            tracing::info!(
                session = session_id,
                dropped = run.count,
                bytes = run.bytes,
                "the client did not read; streamed pieces were dropped"
            );
            let truncated = rpc::event_message(
                session_id,
                run.last_seq,
                run.turn_id.as_deref(),
                &Event::StreamTruncated {
                    from_seq: run.from_seq,
                    dropped: run.count,
                    dropped_bytes: run.bytes,
                },
            );
            self.put(run.last_seq, truncated);
        }
        self.put(seq, message);
    }

    fn put(&mut self, seq: u64, message: Vec<u8>) {
        match &mut self.replay_buffer {
            Some(buffer) => {
                self.buffered_bytes += message.len();
                buffer.push((seq, message));
            }
            None => self.out.send(message),
        }
    }
}

impl SessionEvents {
    /// The sink of a new or restored session; `keep_recent` when clients may attach to it.
    pub(crate) fn new(cap: usize, keep_recent: bool) -> Self {
        SessionEvents {
            cap,
            fanout: Mutex::new(Fanout {
                subscribers: Vec::new(),
                recent: keep_recent.then(|| RecentWindow {
                    messages: VecDeque::new(),
                    bytes: 0,
                }),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Fanout> {
        self.fanout.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Send this session's events from now on to `connection` too (no replay); nothing when it
    /// already receives them.
    pub(crate) fn subscribe(&self, connection: ConnectionId, out: Outbound) {
        let mut fanout = self.lock();
        if !fanout
            .subscribers
            .iter()
            .any(|s| s.connection == connection)
        {
            fanout
                .subscribers
                .push(Subscriber::new(connection, out, false));
        }
    }

    /// Stop sending to `connection` (it closed, or it attaches again).
    pub(crate) fn unsubscribe(&self, connection: ConnectionId) {
        self.lock()
            .subscribers
            .retain(|s| s.connection != connection);
    }

    /// `session/attach`: send `out` every event after `from_seq` (the recent window, and the
    /// stored events older than it), then the live ones. A connection that was subscribed
    /// starts over from `from_seq`. The caller has already answered the request, so the
    /// response precedes the replay.
    pub(crate) async fn attach(
        &self,
        session_id: &str,
        connection: ConnectionId,
        out: Outbound,
        from_seq: u64,
        store: Option<&Store>,
    ) -> Result<(), StoreError> {
        let Some(window) = self.begin_attach(connection, &out, from_seq) else {
            return Ok(());
        };
        let until = window.first().map_or(u64::MAX, |(seq, _)| *seq);
        match self
            .replay_stored(session_id, &out, from_seq, until, store)
            .await
        {
            Ok(sent) => {
                self.finish_attach(connection, &out, window, sent);
                Ok(())
            }
            Err(e) => {
                self.unsubscribe(connection);
                Err(e)
            }
        }
    }

    /// The first step of an attach, in one critical section with the emitter: when the recent
    /// window holds every event after `from_seq`, send it and go live (`None`); otherwise
    /// register the subscriber as replaying (live events wait in its buffer) and return the
    /// window's events after `from_seq`, to send once the store's older ones are out.
    fn begin_attach(
        &self,
        connection: ConnectionId,
        out: &Outbound,
        from_seq: u64,
    ) -> Option<Vec<(u64, Vec<u8>)>> {
        let mut fanout = self.lock();
        fanout.subscribers.retain(|s| s.connection != connection);
        let (window, window_start) = match &fanout.recent {
            Some(recent) => (
                recent
                    .messages
                    .iter()
                    .filter(|(seq, _)| *seq > from_seq)
                    .map(|(seq, message)| (*seq, message.clone()))
                    .collect(),
                recent.messages.front().map(|(seq, _)| *seq),
            ),
            None => (Vec::new(), None),
        };
        // The window holds every event from its first on; when that is at or before the first
        // one the client lacks, the window alone is the replay.
        if window_start.is_some_and(|start| start <= from_seq.saturating_add(1)) {
            for (_, message) in window {
                out.send(message);
            }
            fanout
                .subscribers
                .push(Subscriber::new(connection, out.clone(), false));
            return None;
        }
        fanout
            .subscribers
            .push(Subscriber::new(connection, out.clone(), true));
        Some(window)
    }

    /// The last step of an attach whose stored events up to `sent` are out: the window, then
    /// what waited in the buffer, each only past what was sent, then live.
    fn finish_attach(
        &self,
        connection: ConnectionId,
        out: &Outbound,
        window: Vec<(u64, Vec<u8>)>,
        mut sent: u64,
    ) {
        let mut fanout = self.lock();
        for (seq, message) in window {
            if seq > sent {
                out.send(message);
                sent = seq;
            }
        }
        if let Some(subscriber) = fanout
            .subscribers
            .iter_mut()
            .find(|s| s.connection == connection)
        {
            for (seq, message) in subscriber.replay_buffer.take().unwrap_or_default() {
                if seq > sent {
                    out.send(message);
                    sent = seq;
                }
            }
            subscriber.buffered_bytes = 0;
        }
    }

    /// Send the stored events after `from_seq` and before `until`, page by page; returns the
    /// last `seq` sent (`from_seq` when none).
    async fn replay_stored(
        &self,
        session_id: &str,
        out: &Outbound,
        from_seq: u64,
        until: u64,
        store: Option<&Store>,
    ) -> Result<u64, StoreError> {
        let mut sent = from_seq;
        let Some(store) = store else {
            return Ok(sent);
        };
        loop {
            let page = store
                .events_since(session_id, sent, Some(REPLAY_PAGE))
                .await?;
            let full = page.len() == REPLAY_PAGE;
            for stored in page {
                if stored.seq >= until {
                    return Ok(sent);
                }
                // A long replay must not fill the connection's queue past its limit.
                out.room().await;
                match serde_json::from_str::<Event>(&stored.json) {
                    Ok(event) => out.send(rpc::event_message(
                        session_id,
                        stored.seq,
                        stored.turn_id.as_deref(),
                        &event,
                    )),
                    Err(e) => tracing::warn!(
                        session = session_id,
                        seq = stored.seq,
                        "a stored event cannot be read back and is left out of the replay: {e}"
                    ),
                }
                sent = stored.seq;
            }
            if !full {
                return Ok(sent);
            }
        }
    }
}

impl EventSink for SessionEvents {
    fn emit(&self, session_id: &str, seq: u64, turn_id: Option<&str>, event: &Event) {
        let message = rpc::event_message(session_id, seq, turn_id, event);
        let emitted = Emitted {
            session_id,
            seq,
            turn_id,
            piece: event.is_streamed_piece(),
        };
        let mut fanout = self.lock();
        if let Some(recent) = &mut fanout.recent {
            recent.push(seq, &message);
        }
        let cap = self.cap;
        let last = fanout.subscribers.len().saturating_sub(1);
        let mut message = Some(message);
        for (index, subscriber) in fanout.subscribers.iter_mut().enumerate() {
            let copy = if index == last {
                message.take().unwrap_or_default()
            } else {
                message.clone().unwrap_or_default()
            };
            subscriber.deliver(emitted, copy, cap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::outbound_channel;

    fn text(seq: u64) -> Event {
        Event::AssistantDelta {
            text: format!("piece {seq}"),
        }
    }

    fn seqs(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) -> Vec<u64> {
        let mut seqs = Vec::new();
        while let Ok(message) = rx.try_recv() {
            let value: serde_json::Value = serde_json::from_slice(&message).unwrap();
            seqs.push(value["params"]["seq"].as_u64().unwrap());
        }
        seqs
    }

    /// A client that attaches while the store's part of its replay is being sent gets the
    /// live events that arrive meanwhile after it, in order, none twice.
    #[test]
    fn live_events_wait_behind_a_replay_from_the_store() {
        let events = SessionEvents::new(1 << 20, true);
        // A restored session: seqs 1-4 are only in the store, 5 and 6 in the window.
        for seq in [5, 6] {
            events.emit("s", seq, None, &text(seq));
        }
        let (out, mut rx) = outbound_channel();
        let window = events
            .begin_attach(ConnectionId(7), &out, 0)
            .expect("the window does not reach back to seq 1");
        events.emit("s", 7, None, &text(7));
        assert_eq!(
            seqs(&mut rx),
            Vec::<u64>::new(),
            "nothing before the store's part"
        );
        for seq in 1..=4 {
            out.send(rpc::event_message("s", seq, None, &text(seq)));
        }
        events.finish_attach(ConnectionId(7), &out, window, 4);
        events.emit("s", 8, None, &text(8));
        assert_eq!(seqs(&mut rx), vec![1, 2, 3, 4, 5, 6, 7, 8]);
    }

    /// Within the window, an attach is the window after `fromSeq` and then live.
    #[test]
    fn an_attach_inside_the_window_needs_no_store() {
        let events = SessionEvents::new(1 << 20, true);
        for seq in 1..=5 {
            events.emit("s", seq, None, &text(seq));
        }
        let (out, mut rx) = outbound_channel();
        assert!(events.begin_attach(ConnectionId(1), &out, 3).is_none());
        events.emit("s", 6, None, &text(6));
        assert_eq!(seqs(&mut rx), vec![4, 5, 6]);
    }

    /// The window keeps about `RECENT_WINDOW_BYTES`, dropping the oldest.
    #[test]
    fn the_window_is_bounded() {
        let events = SessionEvents::new(1 << 20, true);
        let big = "x".repeat(64 * 1024);
        for seq in 1..=64 {
            events.emit("s", seq, None, &Event::AssistantDelta { text: big.clone() });
        }
        let fanout = events.lock();
        let recent = fanout.recent.as_ref().unwrap();
        assert!(recent.bytes <= RECENT_WINDOW_BYTES, "{}", recent.bytes);
        assert_eq!(recent.messages.back().map(|(seq, _)| *seq), Some(64));
        assert!(recent.messages.front().map(|(seq, _)| *seq) > Some(1));
    }

    /// A subscriber that does not read loses streamed pieces past the cap, and one
    /// `streamTruncated` accounts for them before the next stored event.
    #[test]
    fn a_stalled_subscriber_drops_pieces_and_is_told() {
        let events = SessionEvents::new(0, false);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // One byte "unsent" already: past the cap of 0.
        let queued = std::sync::Arc::new(super::super::QueuedBytes::with_limit(usize::MAX));
        queued.add(1);
        let out = Outbound {
            tx,
            stdout: None,
            queued_bytes: Some(queued),
        };
        events.subscribe(ConnectionId(1), out);
        for seq in 1..=3 {
            events.emit("s", seq, Some("t"), &text(seq));
        }
        let ended = Event::TurnEnded {
            reason: crate::protocol::TurnEndReason::Completed,
            error: None,
        };
        events.emit("s", 4, Some("t"), &ended);
        let sent: Vec<serde_json::Value> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|m| serde_json::from_slice(&m).unwrap())
            .collect();
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[0]["params"]["type"], "streamTruncated");
        assert_eq!(sent[0]["params"]["seq"], 3);
        assert_eq!(sent[0]["params"]["fromSeq"], 1);
        assert_eq!(sent[0]["params"]["dropped"], 3);
        assert_eq!(sent[1]["params"]["type"], "turnEnded");
    }
}
