//! What a connection sends: [`Outbound`], the serialized messages for one client, and for a
//! WebSocket client the [`QueuedBytes`] its writer task has not written yet.
//!
//! Invariant: a message is counted in `QueuedBytes` before it can be taken off the channel, so
//! the count never goes below zero (a wrapped count reads as a client that stopped reading).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{rpc, stdout};
use crate::protocol::RpcErrorObject;

/// Messages for one connection, already serialized, not yet framed.
#[derive(Clone)]
pub struct Outbound {
    pub(super) tx: mpsc::UnboundedSender<Vec<u8>>,
    /// The real stdout, written directly when it can be (see `stdout`); `None` for an
    /// in-process driver that reads the channel and for a WebSocket connection.
    pub(super) stdout: Option<Arc<stdout::Shared>>,
    /// What a WebSocket connection's writer task has not written yet (`None` for stdout, which
    /// counts its own backlog, and in-process drivers).
    pub(super) queued_bytes: Option<Arc<QueuedBytes>>,
}

/// The bytes queued for a WebSocket connection and not yet taken by its writer; past `limit` the
/// connection's read loop is woken to close it (a client that stopped reading and sends nothing
/// would otherwise never be noticed).
pub(crate) struct QueuedBytes {
    bytes: AtomicUsize,
    limit: usize,
    overflow: tokio::sync::Notify,
    /// Woken when the queue falls to half the limit: a replay waits for it between events, so
    /// replaying a long session never trips the limit itself.
    room: tokio::sync::Notify,
    /// Set when the writer ended (the client is gone): nobody will make room any more.
    closed: std::sync::atomic::AtomicBool,
}

impl QueuedBytes {
    pub(crate) fn with_limit(limit: usize) -> Self {
        QueuedBytes {
            bytes: AtomicUsize::new(0),
            limit,
            overflow: tokio::sync::Notify::new(),
            room: tokio::sync::Notify::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The writer ended: wake a replay waiting for room (its sends now go nowhere) and the read
    /// loop (the connection is over).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.room.notify_waiters();
        self.overflow.notify_one();
    }

    pub(super) fn add(&self, size: usize) {
        let before = self.bytes.fetch_add(size, Ordering::AcqRel);
        if before <= self.limit && before + size > self.limit {
            self.overflow.notify_one();
        }
    }

    pub(super) fn written(&self, size: usize) {
        let before = self.bytes.fetch_sub(size, Ordering::AcqRel);
        let half = self.limit / 2;
        if before > half && before - size <= half {
            self.room.notify_waiters();
        }
    }

    /// Resolves once at most half the limit waits.
    pub(super) async fn room(&self) {
        let half = self.limit / 2;
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.load() <= half || self.closed.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    pub(super) fn load(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    /// Resolves once the queue passed the limit (at once when it already has).
    pub(super) async fn overflow_notified(&self) {
        let notified = self.overflow.notified();
        if self.load() > self.limit {
            return;
        }
        notified.await;
    }
}

impl Outbound {
    pub(super) fn send(&self, body: Vec<u8>) {
        // Nothing goes out above the frame cap clients are told about; builders of large
        // messages fit them first, this catches the rest (see `protocol::fit`).
        let Some(body) = crate::protocol::fit::fit_message(body) else {
            return;
        };
        match &self.stdout {
            Some(stdout) => stdout.send(&self.tx, body),
            // In-process drivers and WebSocket writers read the channel; it is closed only
            // when the connection is gone.
            None => {
                // Counted before it is queued: the writer may take it and count it off at once,
                // and a count taken off before it was added wraps below zero, reads as a client
                // with 16 EiB unread and disconnects one that reads fine.
                let size = body.len();
                if let Some(queued) = &self.queued_bytes {
                    queued.add(size);
                }
                if self.tx.send(body).is_err() {
                    if let Some(queued) = &self.queued_bytes {
                        queued.written(size);
                    }
                }
            }
        }
    }

    pub(super) fn respond<T: Serialize>(&self, id: &Value, result: Result<T, RpcErrorObject>) {
        match result {
            Ok(value) => self.send(rpc::result_message(id, value)),
            Err(error) => self.send(rpc::error_message(id, &error)),
        }
    }

    /// For a replay: wait until a WebSocket client's queue has room (at once for stdout, whose
    /// writer thread takes everything, and for in-process drivers).
    pub(super) async fn room(&self) {
        if let Some(queued) = &self.queued_bytes {
            queued.room().await;
        }
    }

    /// Bytes waiting to be written to a client that reads slowly or not at all (0 for an
    /// in-process driver, which reads its channel).
    pub(super) fn backlog_bytes(&self) -> usize {
        match (&self.stdout, &self.queued_bytes) {
            (Some(stdout), _) => stdout.backlog_bytes(),
            (None, Some(queued)) => queued.load(),
            (None, None) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writer task counts a message off as soon as it takes it; counted on after sending,
    /// the count went below zero now and then, read as an overflow, and a WebSocket client that
    /// read everything was disconnected (seen as `tests/it/attach.rs` requests that never got an
    /// answer under load).
    #[test]
    fn the_count_never_goes_below_zero_while_a_writer_takes_messages() {
        let limit = 1 << 20;
        let queued = Arc::new(QueuedBytes::with_limit(limit));
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let out = Outbound {
            tx,
            stdout: None,
            queued_bytes: Some(queued.clone()),
        };
        let writer = {
            let queued = queued.clone();
            std::thread::spawn(move || {
                // Spinning, not parked: it takes each message the moment it is sent, as a
                // busy writer task does.
                let mut most = 0;
                loop {
                    match rx.try_recv() {
                        Ok(body) => {
                            queued.written(body.len());
                            most = most.max(queued.load());
                        }
                        Err(mpsc::error::TryRecvError::Empty) => std::hint::spin_loop(),
                        Err(mpsc::error::TryRecvError::Disconnected) => return most,
                    }
                }
            })
        };
        for _ in 0..200_000 {
            out.send(b"{}".to_vec());
        }
        drop(out);
        let most = writer.join().expect("the writer thread");
        assert!(
            most <= limit,
            "the count read {most} with at most a few bytes queued"
        );
        assert_eq!(queued.load(), 0);
    }
}
