//! The stdout side of `tandem serve`: frames every outgoing message and writes it, straight from
//! the sending thread when the pipe has room and nothing is queued, else on a writer thread.
//!
//! Why two paths: a streamed delta is written the moment it is ready, and a hand-off to a writer
//! thread costs a thread wake-up per delta (tens of microseconds on a loaded machine, most of
//! what tandem adds to a delta's latency). So when stdout is a pipe or socket, it is made
//! non-blocking and a sender writes its own message directly, if nothing is queued before it and
//! no other write is under way. A direct write never blocks the async runtime: when the pipe is
//! full (the client reads slowly) it fails with `EAGAIN` and the message goes to the writer
//! thread, which waits for room with `poll`. A partial direct write leaves its rest to the writer
//! thread too, which writes it before anything else.
//!
//! Invariant: bytes reach stdout in the order of the `send` calls that a single thread makes,
//! and messages never interleave. Both paths write only while holding `Shared::writing`, and a
//! direct write happens only when `queued` is zero: every message handed to the writer thread
//! (counted in `queued` until it is fully written) goes out before any later direct write.
//!
//! What it does not do: it makes nothing non-blocking when stdout is a terminal or a file, or
//! when stdin or stderr is the same pipe or socket (the flag belongs to the shared open file:
//! stdin's reads and the log's writes must not start failing with `EAGAIN`); those keep the
//! writer thread for every message.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;

use super::framing;
use crate::protocol::Framing;

/// The batch buffer's usual size; a burst of deltas fills it many times over.
const BATCH_CAPACITY: usize = 64 * 1024;

/// Messages at least this large skip the batch buffer.
const DIRECT_WRITE_MIN: usize = 256 * 1024;

/// Messages larger than this always go through the writer thread: a direct write is for the
/// small, latency-bound ones (deltas, replies to control methods).
const INLINE_MAX: usize = 16 * 1024;

/// What the senders share with the writer thread.
pub(super) struct Shared {
    /// stdout (a duplicate of fd 1, so the same open file).
    fd: OwnedFd,
    /// Held by whoever writes to stdout. Holds the rest of a partial direct write, which the
    /// writer thread writes first.
    writing: Mutex<Vec<u8>>,
    /// Messages handed to the writer thread and not yet fully written, plus one for a pending
    /// rest of a partial direct write.
    queued: AtomicUsize,
    /// The bytes of the messages counted in `queued` (bodies, before framing): what a client
    /// that stops reading makes tandem hold. Faces drop streamed pieces past a cap on it.
    queued_bytes: AtomicUsize,
    /// The framing as `framing_code` writes it; set by the read loop.
    framing: Arc<AtomicU8>,
    /// Whether stdout was made non-blocking, so senders may write to it directly.
    inline: bool,
    /// Set when stdout failed (the client went away); nothing is written after that.
    closed: AtomicBool,
}

impl Shared {
    fn framing(&self) -> Framing {
        super::stdio::framing_from_code(self.framing.load(Ordering::SeqCst))
    }

    /// Send one message: written from the calling thread if that can be done now without
    /// waiting, else handed to the writer thread. Never blocks: the lock is only tried, and a
    /// direct write goes to a non-blocking stdout.
    pub(super) fn send(&self, tx: &mpsc::UnboundedSender<Vec<u8>>, body: Vec<u8>) {
        if self.inline && body.len() <= INLINE_MAX && self.queued.load(Ordering::Acquire) == 0 {
            if let Ok(mut rest) = self.writing.try_lock() {
                // Checked again under the lock: the writer thread may have taken one since.
                if self.queued.load(Ordering::Acquire) == 0 {
                    if self.closed.load(Ordering::Relaxed) {
                        return;
                    }
                    // The frame goes out as header, body and trailer in one `writev`: no copy
                    // of the body per message.
                    let mut header = framing::header_buf();
                    let (prefix, suffix) =
                        framing::frame_around(self.framing(), body.len(), &mut header);
                    let parts = [prefix, body.as_slice(), suffix];
                    let total = prefix.len() + body.len() + suffix.len();
                    match rustix::io::writev(&self.fd, &parts.map(io::IoSlice::new)) {
                        Ok(written) if written == total => {}
                        Ok(written) => {
                            // Queued under the lock, so nothing gets between the two halves:
                            // the writer thread writes the rest before anything else. An empty
                            // body only wakes it.
                            let mut skip = written;
                            for part in parts {
                                let start = skip.min(part.len());
                                rest.extend_from_slice(&part[start..]);
                                skip -= start;
                            }
                            self.queue(tx, Vec::new());
                        }
                        Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {
                            self.queue(tx, body);
                        }
                        Err(e) => {
                            tracing::debug!("stdout failed: {e}; the client is gone");
                            self.closed.store(true, Ordering::Relaxed);
                        }
                    }
                    return;
                }
            }
        }
        self.queue(tx, body);
    }

    /// How many bytes wait for the writer thread (a client that does not read makes this grow).
    pub(super) fn backlog_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Relaxed)
    }

    /// Hand a message to the writer thread, counted until it is written.
    fn queue(&self, tx: &mpsc::UnboundedSender<Vec<u8>>, body: Vec<u8>) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.queued_bytes.fetch_add(body.len(), Ordering::Relaxed);
        // The writer is gone only when stdout failed; nothing is left to tell.
        let _ = tx.send(body);
    }
}

/// Set stdout up and start the writer thread, which takes messages from `rx` until every
/// sender is gone.
pub(super) fn spawn_writer(
    rx: mpsc::UnboundedReceiver<Vec<u8>>,
    framing: Arc<AtomicU8>,
) -> io::Result<(Arc<Shared>, std::thread::JoinHandle<()>)> {
    let fd = io::stdout().as_fd().try_clone_to_owned()?;
    let inline = make_nonblocking_if_unshared(&fd);
    Ok(start(fd, inline, rx, framing))
}

/// The same writer over a pipe or socket of the caller's own (an in-process driver's), made
/// non-blocking so senders write to it directly just as they do to a real stdout.
pub(super) fn spawn_writer_on(
    fd: OwnedFd,
    rx: mpsc::UnboundedReceiver<Vec<u8>>,
    framing: Arc<AtomicU8>,
) -> (Arc<Shared>, std::thread::JoinHandle<()>) {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, fstat, FileType, OFlags};
    let inline = fstat(&fd).is_ok_and(|stat| {
        matches!(
            FileType::from_raw_mode(stat.st_mode),
            FileType::Fifo | FileType::Socket
        )
    }) && fcntl_getfl(&fd)
        .is_ok_and(|flags| fcntl_setfl(&fd, flags | OFlags::NONBLOCK).is_ok());
    start(fd, inline, rx, framing)
}

fn start(
    fd: OwnedFd,
    inline: bool,
    rx: mpsc::UnboundedReceiver<Vec<u8>>,
    framing: Arc<AtomicU8>,
) -> (Arc<Shared>, std::thread::JoinHandle<()>) {
    let shared = Arc::new(Shared {
        fd,
        writing: Mutex::new(Vec::new()),
        queued: AtomicUsize::new(0),
        queued_bytes: AtomicUsize::new(0),
        framing,
        inline,
        closed: AtomicBool::new(false),
    });
    let thread_shared = shared.clone();
    // A plain thread, not tokio's stdout: tokio's stdout hands every write to the blocking pool.
    let writer = std::thread::spawn(move || write_loop(rx, &thread_shared));
    (shared, writer)
}

fn write_loop(mut rx: mpsc::UnboundedReceiver<Vec<u8>>, shared: &Shared) {
    let mut out = BlockingFd(shared.fd.as_fd());
    let mut batch = Vec::with_capacity(BATCH_CAPACITY);
    while let Some(first) = rx.blocking_recv() {
        let mut rest = shared
            .writing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let framing = shared.framing();
        let mut taken = 1;
        let mut taken_bytes = 0;
        let mut written = out.write_all(&rest);
        rest.clear();
        let mut next = Some(first);
        while let Some(body) = next.take() {
            taken_bytes += body.len();
            if written.is_err() {
                break;
            }
            if body.len() >= DIRECT_WRITE_MIN {
                // A large reply (a long session's `session/load`) goes out as it is: copying
                // megabytes into the batch buffer would cost time and keep the memory.
                written = write_batch(&mut out, &mut batch)
                    .and_then(|()| framing::write_frame(framing, &body, &mut out));
            } else if !body.is_empty() {
                framing::encode(framing, &body, &mut batch);
            }
            if batch.len() > BATCH_CAPACITY * 16 {
                break;
            }
            next = rx.try_recv().ok();
            taken += usize::from(next.is_some());
        }
        let written = written.and_then(|()| write_batch(&mut out, &mut batch));
        shared.queued.fetch_sub(taken, Ordering::AcqRel);
        shared
            .queued_bytes
            .fetch_sub(taken_bytes, Ordering::Relaxed);
        drop(rest);
        if let Err(e) = written {
            tracing::debug!("stdout failed: {e}; the client is gone");
            shared.closed.store(true, Ordering::Relaxed);
            break;
        }
        if batch.capacity() > BATCH_CAPACITY * 16 {
            batch = Vec::with_capacity(BATCH_CAPACITY);
        }
    }
}

fn write_batch(out: &mut impl Write, batch: &mut Vec<u8>) -> io::Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let written = out.write_all(batch);
    batch.clear();
    written
}

/// Make stdout non-blocking when it is a pipe or socket that neither stdin nor stderr shares;
/// says whether it did. The flag belongs to the open file, so on a shared one it would also
/// make the log's writes fail when full, or stdin's blocking reads fail with `EAGAIN` (a client
/// may hand one socket as both stdin and stdout).
fn make_nonblocking_if_unshared(stdout: &OwnedFd) -> bool {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, fstat, FileType, OFlags};
    let (Ok(out), Ok(input), Ok(log)) = (
        fstat(stdout),
        fstat(io::stdin().as_fd()),
        fstat(io::stderr().as_fd()),
    ) else {
        return false;
    };
    let kind = FileType::from_raw_mode(out.st_mode);
    if !matches!(kind, FileType::Fifo | FileType::Socket) {
        return false;
    }
    let same = |other: &rustix::fs::Stat| out.st_dev == other.st_dev && out.st_ino == other.st_ino;
    if same(&input) || same(&log) {
        return false;
    }
    match fcntl_getfl(stdout) {
        Ok(flags) => fcntl_setfl(stdout, flags | OFlags::NONBLOCK).is_ok(),
        Err(_) => false,
    }
}

/// A writer over a file descriptor that may be non-blocking: when it would block, it waits for
/// room with `poll` instead of failing. Used only on the writer thread.
struct BlockingFd<'a>(BorrowedFd<'a>);

impl Write for BlockingFd<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match rustix::io::write(self.0, buf) {
                Ok(written) => return Ok(written),
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => {
                    tracing::debug!("stdout is full; waiting for the client to read");
                    let mut fds = [rustix::event::PollFd::new(
                        &self.0,
                        rustix::event::PollFlags::OUT,
                    )];
                    match rustix::event::poll(&mut fds, None) {
                        Ok(_) | Err(rustix::io::Errno::INTR) => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Fill a non-blocking pipe completely, then free exactly one page: the next large write
    /// is cut short after that page (Linux copies what fits and returns the count).
    fn nearly_full_pipe() -> (io::PipeReader, OwnedFd, Vec<u8>) {
        let (mut reader, writer) = io::pipe().expect("a pipe");
        let writer = OwnedFd::from(writer);
        let flags = rustix::fs::fcntl_getfl(&writer).expect("flags");
        rustix::fs::fcntl_setfl(&writer, flags | rustix::fs::OFlags::NONBLOCK).expect("O_NONBLOCK");
        let mut filled = Vec::new();
        let mut next = b'a';
        loop {
            let chunk = vec![next; 4096];
            match rustix::io::write(&writer, &chunk) {
                Ok(n) => filled.extend_from_slice(&chunk[..n]),
                Err(rustix::io::Errno::AGAIN) => break,
                Err(e) => panic!("filling the pipe: {e}"),
            }
            next = if next == b'z' { b'a' } else { next + 1 };
        }
        let mut page = vec![0; 4096];
        reader.read_exact(&mut page).expect("free one page");
        assert_eq!(page, filled[..4096]);
        (reader, writer, filled[4096..].to_vec())
    }

    #[test]
    fn a_cut_short_direct_write_is_finished_before_anything_else() {
        for framing in [Framing::Ndjson, Framing::ContentLength] {
            let (mut reader, writer, already) = nearly_full_pipe();
            let (tx, rx) = mpsc::unbounded_channel();
            let code = Arc::new(AtomicU8::new(super::super::stdio::framing_code(framing)));
            let (shared, thread) = start(writer, true, rx, code);
            let large = format!("{{\"n\":1,\"text\":\"{}\"}}", "L".repeat(6000)).into_bytes();
            let small = br#"{"n":2}"#.to_vec();
            // The direct write is cut short after the one free page and its rest is queued;
            // the writer thread cannot finish it until this test reads, so the next message
            // queues behind it.
            shared.send(&tx, large.clone());
            assert_eq!(
                shared.queued.load(Ordering::Acquire),
                1,
                "the rest is queued"
            );
            shared.send(&tx, small.clone());
            assert_eq!(
                shared.queued.load(Ordering::Acquire),
                2,
                "the second waits behind"
            );
            // With the senders gone the writer thread drains the queue and exits, which closes
            // the pipe's last write end: reading to the end cannot hang on a lost byte.
            drop(tx);
            drop(shared);
            let mut received = Vec::new();
            reader.read_to_end(&mut received).expect("read everything");
            thread
                .join()
                .expect("the writer thread ends when the senders are gone");
            let mut expected = already;
            framing::encode(framing, &large, &mut expected);
            framing::encode(framing, &small, &mut expected);
            assert!(
                received == expected,
                "{framing:?}: the stream arrived out of order or cut"
            );
        }
    }

    #[test]
    fn a_small_message_to_a_pipe_with_room_is_written_by_the_sender() {
        let (mut reader, writer) = io::pipe().expect("a pipe");
        let (tx, rx) = mpsc::unbounded_channel();
        let (shared, _thread) = start(OwnedFd::from(writer), true, rx, Arc::new(AtomicU8::new(2)));
        shared.send(&tx, br#"{"n":1}"#.to_vec());
        // Nothing was handed to the writer thread, and the bytes are already in the pipe.
        assert_eq!(shared.queued.load(Ordering::Acquire), 0);
        let expected = b"Content-Length: 7\r\n\r\n{\"n\":1}";
        let mut framed = vec![0; expected.len()];
        reader.read_exact(&mut framed).expect("read");
        assert_eq!(framed, expected);
    }
}
