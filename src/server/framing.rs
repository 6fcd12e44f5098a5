//! Frame decoding and encoding for stdio: newline-delimited JSON or LSP `Content-Length` headers.
//!
//! The framing is detected from the first bytes of the stream and kept for the connection. The
//! decoder never holds more than the frame cap of one frame: an oversized frame is reported and
//! then skipped as it streams past, so a hostile client cannot make the server allocate it.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::protocol::Framing;

/// The largest frame the server accepts, and the most it sends (see [`crate::protocol::fit`]).
/// Prompts with a few images fit; a runaway client doesn't.
pub use crate::protocol::fit::MAX_FRAME_BYTES;
/// The largest header block of one `Content-Length` frame.
const MAX_HEADER_BYTES: usize = 8 * 1024;
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One complete message body.
    Message(Vec<u8>),
    /// A frame over the cap; it was (or is being) skipped without being stored.
    TooLarge,
    /// A header block that is not valid LSP framing.
    Malformed(String),
}

pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    framing: Option<Framing>,
    max: usize,
    /// NDJSON: skipping the rest of an oversized line.
    skipping_line: bool,
    /// Content-Length: bytes of an oversized body still to skip.
    skip_bytes: usize,
    eof: bool,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_FRAME_BYTES)
    }

    pub fn with_limit(inner: R, max: usize) -> Self {
        FrameReader {
            inner,
            buf: Vec::with_capacity(8 * 1024),
            framing: None,
            max,
            skipping_line: false,
            skip_bytes: 0,
            eof: false,
        }
    }

    /// The framing detected so far (`None` before the first non-blank byte).
    pub fn framing(&self) -> Option<Framing> {
        self.framing
    }

    async fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let start = self.buf.len();
        self.buf.resize(start + READ_CHUNK, 0);
        let n = self.inner.read(&mut self.buf[start..]).await;
        match n {
            Ok(n) => {
                self.buf.truncate(start + n);
                if n == 0 {
                    self.eof = true;
                }
                Ok(n > 0)
            }
            Err(e) => {
                self.buf.truncate(start);
                Err(e)
            }
        }
    }

    /// The next frame, or `None` at the end of the stream.
    pub async fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        // A large frame leaves a large buffer behind; give the memory back so one big message
        // (or a hostile oversized one) does not pin it for the life of the connection.
        if self.buf.capacity() > 1024 * 1024 && self.buf.len() < 64 * 1024 {
            self.buf.shrink_to(64 * 1024);
        }
        loop {
            if self.framing.is_none() {
                let first = self.buf.iter().position(|b| !b.is_ascii_whitespace());
                match first {
                    None => {
                        self.buf.clear();
                        if !self.fill().await? {
                            return Ok(None);
                        }
                        continue;
                    }
                    Some(i) => {
                        self.buf.drain(..i);
                        const HEADER: &[u8] = b"content-";
                        let n = self.buf.len().min(HEADER.len());
                        if self.buf[..n].eq_ignore_ascii_case(&HEADER[..n]) {
                            if n < HEADER.len() && !self.eof {
                                // Too few bytes to tell yet.
                                self.fill().await?;
                                continue;
                            }
                            self.framing = Some(if n == HEADER.len() {
                                Framing::ContentLength
                            } else {
                                Framing::Ndjson
                            });
                        } else {
                            self.framing = Some(Framing::Ndjson);
                        }
                    }
                }
            }
            let frame = match self.framing {
                Some(Framing::ContentLength) => self.next_content_length().await?,
                _ => self.next_line().await?,
            };
            return Ok(frame);
        }
    }

    async fn next_line(&mut self) -> std::io::Result<Option<Frame>> {
        let mut scanned = 0;
        loop {
            if let Some(pos) = self.buf[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + pos;
                if self.skipping_line {
                    self.buf.drain(..=end);
                    self.skipping_line = false;
                    scanned = 0;
                    continue;
                }
                if end > self.max {
                    self.buf.drain(..=end);
                    return Ok(Some(Frame::TooLarge));
                }
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    scanned = 0;
                    continue;
                }
                return Ok(Some(Frame::Message(line)));
            }
            scanned = self.buf.len();
            if self.skipping_line {
                self.buf.clear();
                scanned = 0;
            } else if self.buf.len() > self.max {
                self.buf.clear();
                self.skipping_line = true;
                return Ok(Some(Frame::TooLarge));
            }
            if !self.fill().await? {
                if self.skipping_line || self.buf.iter().all(u8::is_ascii_whitespace) {
                    self.buf.clear();
                    return Ok(None);
                }
                let line = std::mem::take(&mut self.buf);
                return Ok(Some(Frame::Message(line)));
            }
        }
    }

    async fn next_content_length(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            if self.skip_bytes > 0 {
                let n = self.skip_bytes.min(self.buf.len());
                self.buf.drain(..n);
                self.skip_bytes -= n;
                if self.skip_bytes > 0 {
                    if !self.fill().await? {
                        return Ok(None);
                    }
                    continue;
                }
            }
            // Blank lines between frames are tolerated.
            let first = self.buf.iter().position(|b| !b.is_ascii_whitespace());
            match first {
                Some(i) => {
                    self.buf.drain(..i);
                }
                None => {
                    self.buf.clear();
                    if !self.fill().await? {
                        return Ok(None);
                    }
                    continue;
                }
            }
            let Some(header_end) = find(&self.buf, b"\r\n\r\n") else {
                if self.buf.len() > MAX_HEADER_BYTES {
                    self.resync();
                    return Ok(Some(Frame::Malformed(
                        "header block too long or missing its blank line; each frame needs `Content-Length: N` then \\r\\n\\r\\n"
                            .to_owned(),
                    )));
                }
                if !self.fill().await? {
                    if self.buf.is_empty() {
                        return Ok(None);
                    }
                    self.buf.clear();
                    return Ok(Some(Frame::Malformed(
                        "the stream ended inside a frame header".to_owned(),
                    )));
                }
                continue;
            };
            let header = String::from_utf8_lossy(&self.buf[..header_end]).into_owned();
            let mut length: Option<usize> = None;
            let mut problem = None;
            for line in header.split("\r\n") {
                let Some((name, value)) = line.split_once(':') else {
                    problem = Some(format!("header line `{line}` has no colon"));
                    break;
                };
                if name.trim().eq_ignore_ascii_case("content-length") {
                    match value.trim().parse::<usize>() {
                        Ok(n) => length = Some(n),
                        Err(_) => {
                            problem =
                                Some(format!("Content-Length `{}` is not a number", value.trim()))
                        }
                    }
                }
            }
            self.buf.drain(..header_end + 4);
            let length = match (problem, length) {
                (Some(p), _) => {
                    self.resync();
                    return Ok(Some(Frame::Malformed(p)));
                }
                (None, None) => {
                    self.resync();
                    return Ok(Some(Frame::Malformed(
                        "frame header has no Content-Length".to_owned(),
                    )));
                }
                (None, Some(n)) => n,
            };
            if length > self.max {
                self.skip_bytes = length;
                return Ok(Some(Frame::TooLarge));
            }
            while self.buf.len() < length {
                if !self.fill().await? {
                    self.buf.clear();
                    return Ok(Some(Frame::Malformed(
                        "the stream ended before the frame body was complete".to_owned(),
                    )));
                }
            }
            let body: Vec<u8> = self.buf.drain(..length).collect();
            return Ok(Some(Frame::Message(body)));
        }
    }

    /// After a broken header, drop bytes up to the next thing that looks like a header.
    fn resync(&mut self) {
        let next = self
            .buf
            .windows(15)
            .position(|w| w.eq_ignore_ascii_case(b"content-length:"));
        match next {
            Some(i) => {
                self.buf.drain(..i);
            }
            None => self.buf.clear(),
        }
    }
}

/// Reads `data` through a `FrameReader` (with a 4 KiB cap) in read sizes chosen by the data
/// itself, handing every frame to `on_frame`. For the fuzz target and its regression corpus:
/// reading from memory never waits, so no runtime is needed.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8], mut on_frame: impl FnMut(Frame)) {
    use futures_util::FutureExt;
    struct Chunked<'a> {
        data: &'a [u8],
        step: usize,
    }
    impl tokio::io::AsyncRead for Chunked<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let n = self.step.min(self.data.len()).min(buf.remaining());
            let (head, tail) = self.data.split_at(n);
            buf.put_slice(head);
            self.data = tail;
            std::task::Poll::Ready(Ok(()))
        }
    }
    let step = 1 + data.first().copied().unwrap_or(0) as usize % 97;
    let mut reader = FrameReader::with_limit(Chunked { data, step }, 4096);
    // Every read makes progress, so the number of frames is bounded by the input length.
    for _ in 0..=data.len() + 1 {
        match reader.next_frame().now_or_never() {
            Some(Ok(Some(frame))) => on_frame(frame),
            Some(Ok(None)) | Some(Err(_)) | None => break,
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Room for a `Content-Length` header of any length a `usize` can have.
pub type HeaderBuf = [u8; 48];

/// A fresh [`HeaderBuf`].
pub const fn header_buf() -> HeaderBuf {
    [0; 48]
}

/// What goes before and after a body of `len` bytes on the wire: the one definition of both
/// framings, which every writer uses. `header` is scratch space for the `Content-Length` line,
/// so framing a message allocates nothing.
pub fn frame_around(
    framing: Framing,
    len: usize,
    header: &mut HeaderBuf,
) -> (&[u8], &'static [u8]) {
    match framing {
        Framing::Ndjson => (&[], b"\n"),
        Framing::ContentLength => {
            use std::io::Write as _;
            let mut cursor = std::io::Cursor::new(&mut header[..]);
            // Cannot fail: the buffer holds the longest such line.
            let _ = write!(cursor, "Content-Length: {len}\r\n\r\n");
            let end = cursor.position() as usize;
            (&header[..end], &[])
        }
    }
}

/// Frame one message body for the wire.
pub fn encode(framing: Framing, body: &[u8], out: &mut Vec<u8>) {
    let mut header = header_buf();
    let (prefix, suffix) = frame_around(framing, body.len(), &mut header);
    out.reserve(prefix.len() + body.len() + suffix.len());
    out.extend_from_slice(prefix);
    out.extend_from_slice(body);
    out.extend_from_slice(suffix);
}

/// [`encode`] straight into a writer, for a message too large to copy into a buffer first.
pub fn write_frame(
    framing: Framing,
    body: &[u8],
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let mut header = header_buf();
    let (prefix, suffix) = frame_around(framing, body.len(), &mut header);
    out.write_all(prefix)?;
    out.write_all(body)?;
    out.write_all(suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], max: usize) -> (Vec<Frame>, Option<Framing>) {
        let mut reader = FrameReader::with_limit(input, max);
        let mut out = Vec::new();
        while let Some(frame) = reader.next_frame().await.unwrap() {
            out.push(frame);
        }
        (out, reader.framing())
    }

    #[tokio::test]
    async fn ndjson_lines() {
        let (f, framing) = frames(b"\n{\"a\":1}\r\n\n{\"b\":2}\n{\"c\":3}", 1024).await;
        assert_eq!(framing, Some(Framing::Ndjson));
        assert_eq!(
            f,
            vec![
                Frame::Message(b"{\"a\":1}".to_vec()),
                Frame::Message(b"{\"b\":2}".to_vec()),
                Frame::Message(b"{\"c\":3}".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn ndjson_oversize_is_skipped() {
        let mut input = vec![b'x'; 5000];
        input.extend_from_slice(b"\n{\"ok\":1}\n");
        let (f, _) = frames(&input, 100).await;
        assert_eq!(
            f,
            vec![Frame::TooLarge, Frame::Message(b"{\"ok\":1}".to_vec())]
        );
    }

    #[tokio::test]
    async fn content_length_frames() {
        let input = b"Content-Length: 7\r\n\r\n{\"a\":1}content-length: 7\r\nContent-Type: x\r\n\r\n{\"b\":2}";
        let (f, framing) = frames(input, 1024).await;
        assert_eq!(framing, Some(Framing::ContentLength));
        assert_eq!(
            f,
            vec![
                Frame::Message(b"{\"a\":1}".to_vec()),
                Frame::Message(b"{\"b\":2}".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn content_length_oversize_and_malformed() {
        let mut input = b"Content-Length: 500\r\n\r\n".to_vec();
        input.extend(vec![b'y'; 500]);
        input.extend_from_slice(b"Content-Length: abc\r\n\r\nContent-Length: 2\r\n\r\n{}");
        let (f, _) = frames(&input, 100).await;
        assert_eq!(
            f,
            vec![
                Frame::TooLarge,
                Frame::Malformed("Content-Length `abc` is not a number".into()),
                Frame::Message(b"{}".to_vec())
            ]
        );
    }

    #[test]
    fn encodes_both() {
        let mut out = Vec::new();
        encode(Framing::ContentLength, b"{}", &mut out);
        assert_eq!(out, b"Content-Length: 2\r\n\r\n{}");
        out.clear();
        encode(Framing::Ndjson, b"{}", &mut out);
        assert_eq!(out, b"{}\n");
    }

    #[test]
    fn writes_the_same_frames_directly() {
        for framing in [Framing::ContentLength, Framing::Ndjson] {
            let mut buffered = Vec::new();
            encode(framing, b"{\"a\":1}", &mut buffered);
            let mut direct = Vec::new();
            write_frame(framing, b"{\"a\":1}", &mut direct).unwrap();
            assert_eq!(direct, buffered, "{framing:?}");
        }
    }
}
