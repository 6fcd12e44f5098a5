//! The event path of a conversation: [`Emitter`] numbers each event with the session's `seq`
//! and hands it to the face's [`EventSink`], after the store committed what it announces.
//!
//! Invariants: `seq` order is wire order and has no gaps; an event with a row reaches the sink
//! only from the store's `after_commit` (invariant 8); a streamed piece never overtakes a stored
//! event of its session; pieces waiting behind stored events are bounded
//! ([`STREAM_BACKLOG_BYTES`]). Does not: know faces, JSON-RPC or the turn loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::protocol::Event;
use crate::store::{AfterCommit, Store};

use super::conversation::lock;

/// Where a session's events go. Implemented by each face (native JSON-RPC, ACP, the CLI).
pub trait EventSink: Send + Sync + 'static {
    fn emit(&self, session_id: &str, seq: u64, turn_id: Option<&str>, event: &Event);
}

/// Assigns `seq` and hands events to the sink under one lock, so the order of `seq` is the
/// order on the wire.
///
/// With a store, an event that has a row (everything but the streamed pieces) goes through the
/// store's writer queue and reaches the sink only after everything enqueued before it (the
/// messages it announces, and the event row itself) is committed: an event a client has seen is
/// never lost in a crash (invariant 8).
///
/// Streamed pieces have no row, so they only need their place in the order. When nothing of
/// this session is waiting in the store queue, a piece goes straight to the sink: a thread hop
/// and a commit per delta would cost more than the rest of the delta's path (issue 3 measures
/// it). Otherwise it queues behind what is waiting. Their numbers are made durable in blocks
/// ([`SEQ_RESERVATION`]) through [`Store::reserve_seq`], so a server restarted after a crash
/// never hands out a `seq` a client may have seen, and streaming writes nothing per delta.
pub struct Emitter {
    session_id: String,
    counters: Mutex<SeqCounters>,
    sink: Arc<dyn EventSink>,
    store: Option<Store>,
    /// Store callbacks of this session (events and ordered replies) not yet run; a streamed
    /// piece may skip the queue only when this is zero.
    queued: Arc<AtomicUsize>,
    /// The streamed pieces waiting in the store queue (their text or output, in bytes), and a
    /// wake-up for producers waiting for it to fall (see [`Emitter::stream_room`]).
    pieces: Arc<PieceBacklog>,
}

/// Streamed pieces of one session that wait in the store queue behind a stored event.
///
/// Once one piece waits there, every later piece must wait behind it (order), so a producer
/// faster than the store thread (a command flooding output: 200 MB in a few seconds) would
/// pile pieces up without bound. Producers that can pause (the shell tool stops reading the
/// command's pipes, so the command blocks as it would on a slow terminal) wait for room
/// instead: memory stays near [`STREAM_BACKLOG_BYTES`] whatever the command prints.
struct PieceBacklog {
    bytes: AtomicUsize,
    room: tokio::sync::Notify,
}

/// How many bytes of streamed pieces may wait in the store queue before producers pause.
pub const STREAM_BACKLOG_BYTES: usize = 4 * 1024 * 1024;

/// The bytes a streamed piece carries (0 for any other event).
fn piece_bytes(event: &Event) -> usize {
    match event {
        Event::AssistantDelta { text } | Event::ReasoningDelta { text } => text.len(),
        Event::ToolCallUpdate {
            output: Some(output),
            ..
        } => output.len(),
        _ => 0,
    }
}

/// How many `seq` numbers one reservation covers. After a crash in the middle of a stream,
/// the restored session numbers on after the reservation: a forward jump of at most this many,
/// never a repeat.
pub const SEQ_RESERVATION: u64 = 1024;

struct SeqCounters {
    /// The last `seq` handed out.
    seq: u64,
    /// The highest `seq` that a restored session is sure to skip: the last stored event's, or
    /// the end of the last reservation.
    durable: u64,
}

/// Events worth a row: everything but the streamed pieces, which the final message covers.
fn persisted(event: &Event) -> bool {
    !event.is_streamed_piece()
}

impl Emitter {
    pub(super) fn new(
        session_id: String,
        last_seq: u64,
        sink: Arc<dyn EventSink>,
        store: Option<Store>,
    ) -> Self {
        Emitter {
            session_id,
            counters: Mutex::new(SeqCounters {
                seq: last_seq,
                durable: last_seq,
            }),
            sink,
            store,
            queued: Arc::new(AtomicUsize::new(0)),
            pieces: Arc::new(PieceBacklog {
                bytes: AtomicUsize::new(0),
                room: tokio::sync::Notify::new(),
            }),
        }
    }

    /// `None` when streamed pieces may go on at once; otherwise a future that resolves when
    /// the pieces waiting in the store queue have fallen to [`STREAM_BACKLOG_BYTES`].
    pub fn stream_room(&self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        if self.pieces.bytes.load(Ordering::Acquire) <= STREAM_BACKLOG_BYTES {
            return None;
        }
        let pieces = self.pieces.clone();
        Some(async move {
            loop {
                let notified = pieces.room.notified();
                if pieces.bytes.load(Ordering::Acquire) <= STREAM_BACKLOG_BYTES {
                    return;
                }
                notified.await;
            }
        })
    }

    pub fn emit(&self, turn_id: Option<&str>, event: Event) {
        let mut counters = lock(&self.counters);
        counters.seq += 1;
        let seq = counters.seq;
        let Some(store) = &self.store else {
            self.sink.emit(&self.session_id, seq, turn_id, &event);
            return;
        };
        let json = persisted(&event)
            .then(|| serde_json::to_string(&event).ok())
            .flatten();
        // A turn streams right after it starts: its row reserves the numbers of the deltas, so
        // the first one does not wait for a reservation of its own.
        let reserve_with_row = json.is_some() && matches!(event, Event::TurnStarted { .. });
        if json.is_some() {
            // The row carries its seq, and the store sets the high-water mark to it (or to the
            // end of the reservation it carries).
            counters.durable = if reserve_with_row {
                seq + SEQ_RESERVATION
            } else {
                seq
            };
        } else if seq <= counters.durable && self.queued.load(Ordering::Acquire) == 0 {
            // Every earlier event of this session has reached the sink (a callback decrements
            // `queued` only after its emit), so this one cannot overtake anything.
            self.sink.emit(&self.session_id, seq, turn_id, &event);
            return;
        } else if seq > counters.durable {
            counters.durable = seq - 1 + SEQ_RESERVATION;
            store.reserve_seq(&self.session_id, counters.durable);
        }
        let sink = self.sink.clone();
        let session_id = self.session_id.clone();
        let turn = turn_id.map(str::to_owned);
        let event_type = event.type_name();
        let queued = self.queued.clone();
        queued.fetch_add(1, Ordering::AcqRel);
        let size = piece_bytes(&event);
        let pieces = (size > 0).then(|| {
            self.pieces.bytes.fetch_add(size, Ordering::AcqRel);
            self.pieces.clone()
        });
        let after_commit: AfterCommit = Box::new(move || {
            sink.emit(&session_id, seq, turn.as_deref(), &event);
            queued.fetch_sub(1, Ordering::AcqRel);
            if let Some(pieces) = pieces {
                let before = pieces.bytes.fetch_sub(size, Ordering::AcqRel);
                if before > STREAM_BACKLOG_BYTES && before - size <= STREAM_BACKLOG_BYTES {
                    pieces.room.notify_waiters();
                }
            }
        });
        match json {
            Some(json) if reserve_with_row => store.record_event_reserving(
                &self.session_id,
                seq,
                turn_id,
                event_type,
                json,
                counters.durable,
                Some(after_commit),
            ),
            json => store.record_event(
                &self.session_id,
                seq,
                turn_id,
                event_type,
                json,
                Some(after_commit),
            ),
        }
    }

    /// The highest `seq` a restarted server must skip: the last one handed out or reserved.
    pub fn durable_seq(&self) -> u64 {
        let counters = lock(&self.counters);
        counters.durable.max(counters.seq)
    }

    /// Resolves once every event emitted before the call has reached the sink. A face that
    /// sends its client something outside the event stream (ACP's `fs/*` requests) waits for
    /// it, so the client has seen the call's `tool_call` before the call reads a file.
    pub fn delivered(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        self.after_queued(Box::new(move || {
            let _ = tx.send(());
        }));
        async move {
            let _ = rx.await;
        }
    }

    /// Run `f` after every event emitted before it has reached the sink, and before any event
    /// emitted after it: how replies to ops are ordered with the session's events.
    pub fn after_queued(&self, f: Box<dyn FnOnce() + Send>) {
        let Some(store) = &self.store else {
            f();
            return;
        };
        // Under the counters lock, so a streamed piece that checks `queued` sees this reply.
        let _counters = lock(&self.counters);
        let queued = self.queued.clone();
        queued.fetch_add(1, Ordering::AcqRel);
        store.after_commit(Box::new(move || {
            f();
            queued.fetch_sub(1, Ordering::AcqRel);
        }));
    }
}
