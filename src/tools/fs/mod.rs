//! The synchronous file tools: read_file, list_dir, glob, grep, and the
//! plan/apply halves of write_file and edit_file.
//!
//! Everything here blocks; the engine runs these inside `spawn_blocking`.
//! Failures are returned as tool results for the model (`is_error`), never
//! as Rust errors, because a failed tool call must not fail the turn.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::{WalkBuilder, WalkState};

use crate::workspace::diff::{file_diff, unified_diff, FileDiff};
use crate::workspace::protected::secret_reason;
use crate::workspace::{EntryKind, Workspace, WorkspaceError, WorkspacePath};

/// The result of one tool call, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub output: String,
    pub is_error: bool,
}

impl ToolOutcome {
    pub fn ok(output: impl Into<String>) -> ToolOutcome {
        ToolOutcome {
            output: output.into(),
            is_error: false,
        }
    }

    pub fn error(output: impl Into<String>) -> ToolOutcome {
        ToolOutcome {
            output: output.into(),
            is_error: true,
        }
    }
}

impl From<WorkspaceError> for ToolOutcome {
    fn from(err: WorkspaceError) -> ToolOutcome {
        ToolOutcome::error(err.to_string())
    }
}

/// Lines shown by read_file when the model gives no limit.
const READ_DEFAULT_LIMIT: u64 = 2000;
/// Longer lines are cut: minified files would otherwise flood the context.
const READ_MAX_LINE_CHARS: usize = 2000;
/// A second guard on read_file output size, for files of many long lines.
const READ_MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// How much of a file is checked for NUL bytes to call it binary.
const BINARY_SNIFF_BYTES: u64 = 8 * 1024;
const LIST_MAX_ENTRIES: usize = 1000;
const GLOB_MAX_RESULTS: usize = 1000;
const GREP_MAX_MATCHES: usize = 500;
const GREP_MAX_LINE_CHARS: usize = 200;
/// How much of the user-vs-proposed diff is echoed back to the model.
const OVERRIDE_DIFF_MAX_LINES: usize = 60;

mod edit;
mod read;
mod search;
#[cfg(test)]
mod tests;

pub use edit::*;
pub use read::*;
pub use search::*;
