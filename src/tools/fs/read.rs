//! `read_file`: a window of lines with `cat -n` numbers, read line by line with a cap, so a
//! slice of a huge file costs no memory; binary files are refused with a note.

use super::*;

/// Reads a text file with `cat -n` style line numbers. `offset` is the
/// 1-based first line, `limit` the number of lines (default 2000).
pub fn read_file(
    ws: &Workspace,
    path: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> ToolOutcome {
    match read_file_inner(ws, path, offset, limit) {
        Ok(outcome) => outcome,
        Err(err) => err.into(),
    }
}

pub(super) fn read_file_inner(
    ws: &Workspace,
    path: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> Result<ToolOutcome, WorkspaceError> {
    let p = ws.resolve(path)?;
    let mut file = ws.open_file(&p)?;
    let mut head = Vec::new();
    (&mut file)
        .take(BINARY_SNIFF_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| ws.map_io(&p, "read", e))?;
    if head.contains(&0) {
        return Ok(ToolOutcome::error(format!(
            "`{}` looks like a binary file (it contains NUL bytes); read_file only shows text, so use the shell tool (for example `xxd` or `file`) to inspect it",
            p.display
        )));
    }

    // Streaming keeps memory flat for large files: only the requested window
    // is kept, the rest is just counted.
    let reader = BufReader::new(Cursor::new(head).chain(file));
    number_lines(&p.display, reader, offset, limit).map_err(|e| ws.map_io(&p, "read", e))
}

/// Formats text the client's editor supplied (an unsaved buffer, through ACP's
/// `fs/read_text_file`) exactly like read_file formats a file on disk.
pub fn read_text_window(
    display: &str,
    text: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> ToolOutcome {
    if text.contains('\0') {
        return ToolOutcome::error(format!(
            "`{display}` looks like a binary file (it contains NUL bytes); read_file only shows text, so use the shell tool (for example `xxd` or `file`) to inspect it"
        ));
    }
    number_lines(display, Cursor::new(text.as_bytes()), offset, limit)
        .unwrap_or_else(|e| ToolOutcome::error(format!("could not read `{display}`: {e}")))
}

/// How far past the shown window read_file keeps counting lines for its "more lines" note;
/// beyond it the note says there is more without a count (a 1.5 GB file is not scanned whole
/// to answer a slice).
pub(super) const READ_COUNT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// What one call of [`read_line_capped`] found.
pub(super) struct LineRead {
    /// Bytes consumed from the reader, newline included; 0 at the end.
    pub(super) consumed: u64,
    /// Whether the line had more than the kept bytes.
    pub(super) cut: bool,
}

/// Reads one line, keeping at most `keep` bytes of it in `line` (nothing when `keep` is 0)
/// and skipping the rest up to the newline, so a line of any length costs only the buffer.
pub(super) fn read_line_capped(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    keep: usize,
) -> std::io::Result<LineRead> {
    line.clear();
    let mut consumed = 0u64;
    let mut cut = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let (piece, done) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        let room = keep.saturating_sub(line.len());
        if piece.len() > room {
            cut |= piece[room..].iter().any(|&b| b != b'\n' && b != b'\r');
        }
        line.extend_from_slice(&piece[..piece.len().min(room)]);
        let used = piece.len();
        reader.consume(used);
        consumed += used as u64;
        if done {
            break;
        }
    }
    Ok(LineRead { consumed, cut })
}

/// The `cat -n` window of read_file over any reader. Lines are read with a cap
/// ([`read_line_capped`]): memory stays at the window's size whatever the file holds.
pub(super) fn number_lines(
    display: &str,
    mut reader: impl BufRead,
    offset: Option<u64>,
    limit: Option<u64>,
) -> std::io::Result<ToolOutcome> {
    let first = offset.unwrap_or(1).max(1);
    let limit = limit.unwrap_or(READ_DEFAULT_LIMIT).max(1);
    // Four bytes per character at most, plus a character cut in half, so the character cap
    // below always decides and the kept bytes never fall short of it.
    let keep_bytes = READ_MAX_LINE_CHARS * 4 + 4;
    let mut out = String::new();
    let mut line = Vec::new();
    let mut line_no: u64 = 0;
    let mut shown: u64 = 0;
    let mut last_shown: u64 = 0;
    let mut remaining: u64 = 0;
    let mut counted_bytes: u64 = 0;
    let mut uncounted = false;
    let mut cut_lines = false;
    let mut lossy = false;
    loop {
        let showing = line_no + 1 >= first && shown < limit && out.len() < READ_MAX_OUTPUT_BYTES;
        let read = read_line_capped(&mut reader, &mut line, if showing { keep_bytes } else { 0 })?;
        if read.consumed == 0 {
            break;
        }
        line_no += 1;
        if line_no < first {
            continue;
        }
        if !showing {
            remaining += 1;
            counted_bytes += read.consumed;
            if counted_bytes > READ_COUNT_MAX_BYTES {
                uncounted = true;
                break;
            }
            continue;
        }
        let bytes = trim_newline(&line);
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            // A multi-byte character cut by the byte cap is not a sign of a non-UTF-8 file.
            Err(e) if read.cut && e.error_len().is_none() => std::borrow::Cow::Borrowed(
                std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or(""),
            ),
            Err(_) => {
                lossy = true;
                String::from_utf8_lossy(bytes)
            }
        };
        let (text, cut_chars) = truncate_chars(&text, READ_MAX_LINE_CHARS);
        let was_cut = cut_chars || read.cut;
        cut_lines |= was_cut;
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("{line_no:>6}\t{text}"));
        if was_cut {
            out.push_str(" … [line truncated]");
        }
        shown += 1;
        last_shown = line_no;
    }

    if line_no == 0 {
        return Ok(ToolOutcome::ok(format!("`{display}` is empty.")));
    }
    if shown == 0 {
        return Ok(ToolOutcome::error(format!(
            "`{display}` has {line_no} lines; offset {first} is past the end. Call read_file with a smaller offset."
        )));
    }
    let mut notes = Vec::new();
    if cut_lines {
        notes.push(format!(
            "Lines longer than {READ_MAX_LINE_CHARS} characters were truncated; use grep or the shell tool (for example `cut -c`) to see the rest of a long line."
        ));
    }
    if lossy {
        notes.push(
            "The file is not valid UTF-8; invalid bytes are shown as U+FFFD, and edit_file cannot change it."
                .to_string(),
        );
    }
    if uncounted {
        notes.push(format!(
            "… more lines (over {} MiB more; not counted); call read_file with offset={}",
            READ_COUNT_MAX_BYTES / (1024 * 1024),
            last_shown + 1
        ));
    } else if remaining > 0 {
        notes.push(format!(
            "… {remaining} more lines; call read_file with offset={}",
            last_shown + 1
        ));
    }
    for note in notes {
        out.push_str("\n\n");
        out.push_str(&note);
    }
    Ok(ToolOutcome::ok(out))
}

pub(super) fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Cuts `text` to at most `max` characters; says whether it cut.
pub(super) fn truncate_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((byte_index, _)) => (&text[..byte_index], true),
        None => (text, false),
    }
}
