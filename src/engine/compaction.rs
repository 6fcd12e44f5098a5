//! Context accounting and compaction: when to compact, where the boundary goes, and what the
//! summarizing request looks like.
//!
//! Compaction never rewrites the canonical history. It appends a `compacted` notice that names a
//! boundary message and carries a summary; the outbound projection shows the summary in place of
//! everything before the boundary. Boundaries only move forward, and never split a tool call from
//! its result.

use super::history::{Message, NoticeKind, Part, Role, Source};

/// A rough token estimate for text: about four bytes per token for English and code.
fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Estimated tokens of one message as a model would receive it.
pub fn estimate_message(message: &Message) -> u64 {
    let mut tokens = 4;
    for part in &message.parts {
        tokens += match part {
            Part::Text { text } => estimate_text(text),
            // Vendors charge roughly a thousand tokens for a typical screenshot.
            Part::Image { .. } => 1_000,
            // A PDF page costs about as much as an image; the page count is unknown here, so
            // estimate from the size (base64 of a typical page is around 100 KB).
            Part::Document { data, .. } => 1_500 * (data.len() as u64 / 100_000).max(1),
        };
    }
    for call in &message.tool_calls {
        tokens += 8 + estimate_text(&call.name) + estimate_text(&call.arguments);
    }
    tokens
}

/// The latest compaction in `history`: its notice index and its boundary index.
pub fn latest_compaction(history: &[Message]) -> Option<(usize, usize, &str)> {
    let (notice_index, record) = history.iter().enumerate().rev().find_map(|(i, m)| {
        (m.notice == Some(NoticeKind::Compacted))
            .then_some(m.meta.compaction.as_ref())
            .flatten()
            .map(|c| (i, c))
    })?;
    let boundary = history.iter().position(|m| m.id == record.boundary)?;
    Some((notice_index, boundary, record.summary.as_str()))
}

/// Estimated tokens of what the next request will carry (messages only; the caller adds the
/// system prompt and tools). Uses the provider's own count from the last response when it is
/// newer than the last compaction, plus an estimate of what came after it.
pub fn estimate_request(history: &[Message]) -> u64 {
    let compaction = latest_compaction(history);
    let start = compaction.map(|(_, boundary, _)| boundary).unwrap_or(0);
    let after_notice = compaction.map(|(notice, _, _)| notice).unwrap_or(0);
    let summary_tokens = compaction
        .map(|(_, _, s)| estimate_text(s) + 8)
        .unwrap_or(0);
    let measured = history
        .iter()
        .enumerate()
        .rev()
        .find(|(i, m)| *i >= after_notice && m.meta.usage.is_some());
    match measured {
        Some((index, message)) => {
            // The provider's input count covers everything before this answer; for the answer
            // itself take the larger of its output count and tandem's estimate, so an answer a
            // provider under-reports (or a proxy reports as zero) still counts its size.
            let usage = message
                .meta
                .usage
                .as_ref()
                .map(|u| u.input_tokens + u.output_tokens.max(estimate_message(message)))
                .unwrap_or(0);
            usage
                + history[index + 1..]
                    .iter()
                    .filter(|m| m.role != Role::Notice)
                    .map(estimate_message)
                    .sum::<u64>()
        }
        None => {
            summary_tokens
                + history[start..]
                    .iter()
                    .filter(|m| m.role != Role::Notice)
                    .map(estimate_message)
                    .sum::<u64>()
        }
    }
}

/// Estimated tokens of the messages from `boundary` on, the part a compaction at `boundary`
/// keeps verbatim (notices are never sent).
pub fn estimate_verbatim(history: &[Message], boundary: usize) -> u64 {
    history[boundary.min(history.len())..]
        .iter()
        .filter(|m| m.role != Role::Notice)
        .map(estimate_message)
        .sum()
}

/// Room kept for the summary when judging whether a compaction can make the next request fit:
/// a tenth of the window, at most 2,000 tokens. A summary that comes out longer is caught by the
/// check after the compaction.
pub fn summary_allowance(window: u64) -> u64 {
    (window / 10).min(2_000)
}

/// Indices where history may be cut: every tool call before the cut has its result before
/// the cut, and the message at the cut is a user or assistant message.
fn clean_cuts(history: &[Message], after: usize) -> Vec<(usize, bool)> {
    let mut cuts = Vec::new();
    let mut open: Vec<&str> = Vec::new();
    for (index, message) in history.iter().enumerate() {
        let is_user = message.role == Role::User
            && matches!(message.meta.source, Source::User | Source::Steering);
        if index > after && open.is_empty() && matches!(message.role, Role::User | Role::Assistant)
        {
            cuts.push((index, is_user));
        }
        for call in &message.tool_calls {
            open.push(&call.id);
        }
        if let Some(result) = &message.tool_result {
            open.retain(|id| *id != result.tool_call_id);
        }
    }
    cuts
}

/// Where to put the next boundary so that what stays verbatim fits in `target` tokens.
///
/// Prefers cuts at user messages (whole turns stay verbatim), then cuts inside a turn. Returns
/// `None` when no cut moves the boundary forward, which means compaction cannot help.
pub fn choose_boundary(history: &[Message], target: u64) -> Option<usize> {
    let previous = latest_compaction(history).map(|(_, b, _)| b);
    let after = previous.unwrap_or(0);
    let cuts = clean_cuts(history, after);
    // Never cut at the very first message: there would be nothing to summarize.
    let cuts: Vec<(usize, bool)> = cuts.into_iter().filter(|(i, _)| *i > 0).collect();
    let mut suffix = vec![0u64; history.len() + 1];
    for i in (0..history.len()).rev() {
        let own = if history[i].role == Role::Notice {
            0
        } else {
            estimate_message(&history[i])
        };
        suffix[i] = suffix[i + 1] + own;
    }
    let fits = |i: usize| suffix[i] <= target;
    if let Some((i, _)) = cuts.iter().find(|(i, user)| *user && fits(*i)) {
        return Some(*i);
    }
    if let Some((i, _)) = cuts.iter().find(|(i, _)| fits(*i)) {
        return Some(*i);
    }
    // Nothing fits: move as far forward as a clean cut allows, if that is forward at all.
    cuts.last().map(|(i, _)| *i)
}

pub const SUMMARY_INSTRUCTIONS: &str = "You are compacting a coding session so it can continue in a \
smaller context. Write a summary that lets the work continue without the earlier messages: the user's \
goals and instructions, decisions made, files read and changed (with paths), commands run and their \
outcomes, the current state, and what remains to do. Keep every fact needed; drop chatter. Plain text, \
no preamble.";

pub const SUMMARY_REQUEST: &str =
    "Summarize the conversation above for continuing the work, following \
your instructions.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::history::{CompactionRecord, ResultStatus, ToolCallRecord};

    fn user(text: &str) -> Message {
        Message::user(vec![Part::Text { text: text.into() }], Source::User, None)
    }

    fn call(id: &str) -> ToolCallRecord {
        ToolCallRecord {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
            extras: Default::default(),
        }
    }

    #[test]
    fn boundary_prefers_whole_turns_and_never_splits_pairs() {
        let big = "x".repeat(4000);
        let history = vec![
            user(&big),
            Message::assistant(String::new(), vec![call("a")], "t"),
            Message::tool_result(&call("a"), ResultStatus::Completed, big.clone(), "t"),
            Message::assistant("done".into(), vec![], "t"),
            user("small follow-up"),
            Message::assistant("ok".into(), vec![], "t2"),
        ];
        assert_eq!(choose_boundary(&history, 100), Some(4));
        // With a tiny target nothing fits, so the latest clean cut is used (index 5).
        assert_eq!(choose_boundary(&history, 1), Some(5));
        let cuts = clean_cuts(&history, 0);
        assert!(
            !cuts.iter().any(|(i, _)| *i == 2),
            "never between a call and its result"
        );
    }

    #[test]
    fn boundary_moves_forward_or_gives_up() {
        let mut history = vec![
            user("a"),
            Message::assistant("b".into(), vec![], "t"),
            user("c"),
        ];
        let mut notice = Message::notice(NoticeKind::Compacted, "compacted".into(), None);
        notice.meta.compaction = Some(Box::new(CompactionRecord {
            boundary: history[2].id.clone(),
            summary: "s".into(),
        }));
        history.push(notice);
        assert_eq!(
            choose_boundary(&history, 0),
            None,
            "no cut after the boundary"
        );
        history.push(Message::assistant("d".into(), vec![], "t"));
        assert_eq!(choose_boundary(&history, 0), Some(4));
    }

    #[test]
    fn estimate_uses_usage_after_the_last_compaction() {
        let mut answer = Message::assistant("hi".into(), vec![], "t");
        answer.meta.usage = Some(Box::new(crate::engine::history::UsageRecord {
            model: "m".into(),
            input_tokens: 1000,
            output_tokens: 10,
            cached_tokens: None,
        }));
        let history = vec![user("q"), answer, user(&"y".repeat(400))];
        assert_eq!(estimate_request(&history), 1010 + 104);
    }
}
