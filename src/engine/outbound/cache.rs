//! The outbound cache: every message of a session's view, serialized once for the provider and
//! model its requests go to, so that a turn's work grows with what is new and not with the
//! history.
//!
//! It lives in the conversation's state, beside the history it mirrors, and is read and
//! extended under the same lock. It holds the view of `history[..covered]` as
//! [`EncodedMessage`]s; a request takes those as they are and projects only the rest.
//!
//! Invariants:
//! - The cached messages are exactly what [`super::project`] gives for `history[..covered]`
//!   under the cache's key, except that each prompt keeps the per-turn context it was first
//!   sent with (so earlier prompts do not change when the mode does).
//! - Everything the encoding depends on is in [`CacheKey`]: the provider kind (whose extras
//!   are kept), the model (image and document placeholders name it), whether it reads images
//!   and PDFs (the degradation rules), the message form, and the latest compaction. Any change
//!   rebuilds the cache from the view's start.
//! - The history only grows at its end or is cut back (a rewind) or completed at its front (a
//!   resumed session's parse); the ids of the first and of the last covered message catch
//!   the last two, and the cache is rebuilt.
//! - `covered` never ends inside a run of tool results: the trailing run (the current round's
//!   results) and everything from the first of the turn's own reminders on is projected
//!   fresh, since later messages can still change how it is written.

use std::sync::Arc;

use super::{is_prompt, project_range, summary_message, ProjectionContext};
use crate::engine::compaction::latest_compaction;
use crate::engine::history::{Message, Role};
use crate::providers::{EncodedList, EncodedMessage, MessageForm, OutboundMessage, Provider};

/// How many history messages are projected at a time when the cache catches up.
const ENCODE_STRETCH: usize = 256;

/// What the cached encoding depends on besides the messages themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CacheKey {
    provider_kind: &'static str,
    model_id: String,
    vision: bool,
    pdf: bool,
    form: MessageForm,
    /// The id of the latest compaction's notice: its summary replaces the view's start.
    compaction: Option<String>,
}

/// The encoded view of the start of a session's history. See the module documentation.
#[derive(Default)]
pub struct OutboundCache {
    key: Option<CacheKey>,
    /// Shared with the requests it started (see [`EncodedList`]).
    encoded: Arc<EncodedList>,
    /// How many history messages the encoded view covers.
    covered: usize,
    /// Ids of `history[0]` and `history[covered - 1]`, to notice a history that was cut back or
    /// completed at its front.
    first_id: Option<String>,
    last_id: Option<String>,
    /// The view holds a prompt, so the per-turn context rides on prompts only.
    has_prompt: bool,
}

/// A request's conversation: the cached start, and the history index the rest starts at.
pub struct CachedStart {
    pub encoded: Arc<EncodedList>,
    pub rest_from: usize,
}

impl OutboundCache {
    /// Bytes of serialized messages held.
    pub fn bytes(&self) -> usize {
        self.encoded.bytes()
    }

    /// Forget everything (the history is about to be replaced or the session closes).
    pub fn clear(&mut self) {
        *self = OutboundCache::default();
    }

    /// The cached start of the view of `history[..limit]`, extended first with whatever of it
    /// can be cached now. `None` when this request cannot use the cache: the provider reads
    /// typed messages only, or the view holds no prompt (the context then rides on its last
    /// user message, which moves), and the caller projects the whole history.
    pub fn start(
        &mut self,
        history: &[Message],
        ctx: &ProjectionContext<'_>,
        provider: &dyn Provider,
        form: MessageForm,
        limit: usize,
    ) -> Option<CachedStart> {
        // A provider that reads typed messages only (the scripted one) encodes nothing.
        provider.encode(&OutboundMessage::User { parts: Vec::new() }, form)?;
        let compaction = latest_compaction(history);
        let key = CacheKey {
            provider_kind: provider.kind(),
            model_id: ctx.model_id.to_owned(),
            vision: ctx.vision,
            pdf: ctx.pdf,
            form,
            compaction: compaction.map(|(notice, _, _)| history[notice].id.clone()),
        };
        let view_start = compaction.map(|(_, boundary, _)| boundary).unwrap_or(0);
        if !self.still_valid(&key, history) {
            self.clear();
            if let Some((_, _, summary)) = compaction {
                self.push(provider.encode(&summary_message(summary), form)?);
            }
            self.covered = view_start;
            self.key = Some(key);
        }
        let has_prompt = self.has_prompt
            || history[self.covered.min(history.len())..]
                .iter()
                .any(is_prompt);
        if !has_prompt {
            return None;
        }
        // Stop before the trailing run of tool results (and notices): a result appended to the
        // run later would change where its images go.
        let mut end = limit.min(history.len());
        while end > self.covered && matches!(history[end - 1].role, Role::Tool | Role::Notice) {
            end -= 1;
        }
        if end > self.covered {
            // In stretches, so that a first request after a resume does not hold the typed
            // projection of the whole history at once beside its encoding.
            let mut projected: Vec<OutboundMessage> = Vec::new();
            // In place: the previous request (the only other holder) is gone by now.
            let list = Arc::make_mut(&mut self.encoded);
            list.reserve_for(end - self.covered);
            while self.covered < end {
                let mut stop = (self.covered + ENCODE_STRETCH).min(end);
                // A stretch must end where the next one starts at a user or assistant message.
                while stop < end && matches!(history[stop].role, Role::Tool | Role::Notice) {
                    stop += 1;
                }
                project_range(&history[self.covered..stop], ctx, true, &mut projected);
                for message in projected.drain(..) {
                    list.push(provider.encode(&message, form)?);
                }
                self.has_prompt |= history[self.covered..stop].iter().any(is_prompt);
                self.covered = stop;
            }
            self.first_id = history.first().map(|m| m.id.clone());
            self.last_id = Some(history[end - 1].id.clone());
        }
        Some(CachedStart {
            encoded: Arc::clone(&self.encoded),
            rest_from: self.covered,
        })
    }

    fn push(&mut self, message: EncodedMessage) {
        Arc::make_mut(&mut self.encoded).push(message);
    }

    fn still_valid(&self, key: &CacheKey, history: &[Message]) -> bool {
        if self.key.as_ref() != Some(key) || self.covered > history.len() {
            return false;
        }
        match (&self.first_id, &self.last_id) {
            (Some(first), Some(last)) => {
                history.first().is_some_and(|m| &m.id == first)
                    && history[self.covered - 1].id == *last
            }
            // Nothing covered yet (or only a compaction's summary).
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::history::{NoticeKind, Part, ResultStatus, Source, ToolCallRecord};
    use crate::engine::outbound::project;
    use crate::providers::{openai, ProviderRequest};
    use std::collections::BTreeMap;

    fn ctx<'a>(model: &'a str, context: &'a str) -> ProjectionContext<'a> {
        ProjectionContext {
            provider_kind: "openai",
            model_id: model,
            vision: false,
            pdf: false,
            turn_context: Some(context),
        }
    }

    fn provider() -> openai::OpenAiProvider {
        openai::OpenAiProvider::new("http://127.0.0.1:9".into(), None)
    }

    const FORM: MessageForm = MessageForm {
        calls_as_text: false,
    };

    fn user(text: &str) -> Message {
        Message::user(vec![Part::Text { text: text.into() }], Source::User, None)
    }

    fn round(history: &mut Vec<Message>, n: usize) {
        let call = ToolCallRecord {
            id: format!("c{n}"),
            name: "read_file".into(),
            arguments: "{}".into(),
            extras: BTreeMap::new(),
        };
        history.push(Message::assistant(String::new(), vec![call.clone()], "t"));
        let mut result = Message::tool_result(&call, ResultStatus::Completed, "x".into(), "t");
        if n.is_multiple_of(2) {
            result.parts.push(Part::Image {
                mime_type: "image/png".into(),
                data: "AAAA".into(),
            });
        }
        history.push(result);
    }

    /// The request body a cached view gives, as bytes, beside the one the plain projection
    /// gives.
    fn bodies(
        cache: &mut OutboundCache,
        history: &[Message],
        ctx: &ProjectionContext<'_>,
    ) -> (Vec<u8>, Vec<u8>) {
        let request = |encoded, messages| ProviderRequest {
            encoded,
            model: "m".into(),
            system: "s".into(),
            messages,
            tools: vec![crate::providers::ToolSpec {
                name: "read_file".into(),
                description: "d".into(),
                parameters: serde_json::json!({}),
            }],
            max_output_tokens: None,
            reasoning: false,
            thinking_budget: None,
            parallel_tool_calls: true,
        };
        let start = cache
            .start(history, ctx, &provider(), FORM, history.len())
            .unwrap();
        let mut rest = Vec::new();
        project_range(&history[start.rest_from..], ctx, true, &mut rest);
        let cached = openai::request_bytes(&request(start.encoded, rest)).to_bytes();
        let plain =
            openai::request_bytes(&request(Default::default(), project(history, ctx))).to_bytes();
        (cached, plain)
    }

    /// A request gets the cache's list itself, not a copy; once it is gone the cache appends
    /// to that same list, and a list a request still holds never changes under it.
    #[test]
    fn requests_share_the_cached_list_and_the_cache_extends_it_in_place() {
        let mut cache = OutboundCache::default();
        let context = ctx("m", "<turn-context>ask</turn-context>");
        let mut history = vec![user("first")];
        for n in 0..3 {
            round(&mut history, n);
        }
        history.push(Message::assistant("answer".into(), vec![], "t"));
        let first = cache
            .start(&history, &context, &provider(), FORM, history.len())
            .unwrap();
        let (list, covered) = (Arc::as_ptr(&first.encoded), first.encoded.len());
        assert!(covered > 0);
        assert!(
            Arc::ptr_eq(&first.encoded, &cache.encoded),
            "shared, not copied"
        );
        drop(first);
        history.push(user("second"));
        history.push(Message::assistant("more".into(), vec![], "t"));
        let second = cache
            .start(&history, &context, &provider(), FORM, history.len())
            .unwrap();
        assert_eq!(Arc::as_ptr(&second.encoded), list, "extended in place");
        assert_eq!(second.encoded.len(), covered + 2);
        let held = second.encoded;
        history.push(user("third"));
        history.push(Message::assistant("again".into(), vec![], "t"));
        let third = cache
            .start(&history, &context, &provider(), FORM, history.len())
            .unwrap();
        assert_eq!(held.len(), covered + 2, "a held list never changes");
        assert_eq!(third.encoded.len(), covered + 4);
        assert!(!Arc::ptr_eq(&held, &third.encoded));
    }

    #[test]
    fn the_cached_view_equals_the_projection_and_grows_only_at_its_end() {
        let mut cache = OutboundCache::default();
        let mut history = vec![user("first")];
        let context = ctx("m", "<turn-context>ask</turn-context>");
        let mut previous: Vec<u8> = Vec::new();
        for n in 0..6 {
            round(&mut history, n);
            if n % 3 == 2 {
                history.push(Message::assistant(format!("answer {n}"), vec![], "t"));
                history.push(Message::notice(NoticeKind::Warning, "w".into(), None));
                history.push(user(&format!("prompt {n}")));
            }
            let (cached, plain) = bodies(&mut cache, &history, &context);
            assert_eq!(
                String::from_utf8_lossy(&cached),
                String::from_utf8_lossy(&plain)
            );
            // Append-only: the previous request minus its closing `]}` starts this one.
            let stem = &previous[..previous.len().saturating_sub(2)];
            assert!(cached.starts_with(stem), "request {n} rewrote its start");
            previous = cached;
        }
        assert!(cache.covered > 0 && cache.bytes() > 0);
    }

    #[test]
    fn a_long_history_is_encoded_in_stretches_that_give_the_same_view() {
        let mut cache = OutboundCache::default();
        let context = ctx("m", "<c/>");
        let mut history = vec![user("first")];
        for n in 0..400 {
            // Two calls, two results with an image each: a stretch that ended between them
            // would move the first image.
            let calls: Vec<ToolCallRecord> = (0..2)
                .map(|k| ToolCallRecord {
                    id: format!("c{n}_{k}"),
                    name: "shot".into(),
                    arguments: "{}".into(),
                    extras: BTreeMap::new(),
                })
                .collect();
            history.push(Message::assistant(String::new(), calls.clone(), "t"));
            for call in &calls {
                let mut result =
                    Message::tool_result(call, ResultStatus::Completed, "x".into(), "t");
                result.parts.push(Part::Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                });
                history.push(result);
            }
            if n % 7 == 6 {
                history.push(Message::assistant(format!("answer {n}"), vec![], "t"));
                history.push(user(&format!("prompt {n}")));
            }
        }
        assert!(history.len() > 3 * ENCODE_STRETCH);
        let (cached, plain) = bodies(&mut cache, &history, &context);
        assert_eq!(
            String::from_utf8_lossy(&cached),
            String::from_utf8_lossy(&plain)
        );
    }

    #[test]
    fn earlier_prompts_keep_their_context_and_a_model_switch_rebuilds() {
        let mut cache = OutboundCache::default();
        let mut history = vec![user("first")];
        let (ask, auto) = ("<c>ask</c>", "<c>autoEdit</c>");
        bodies(&mut cache, &history, &ctx("m", ask));
        history.push(Message::assistant("a".into(), vec![], "t"));
        history.push(user("second"));
        let (cached, plain) = bodies(&mut cache, &history, &ctx("m", auto));
        let cached = String::from_utf8(cached).unwrap();
        assert!(cached.contains("first\\n\\n<c>ask</c>"), "{cached}");
        assert!(cached.contains("second\\n\\n<c>autoEdit</c>"), "{cached}");
        // A fresh projection gives every prompt the current context.
        assert!(String::from_utf8(plain)
            .unwrap()
            .contains("first\\n\\n<c>autoEdit</c>"));
        // Another model: rebuilt, so the cached view is the projection again.
        let (cached, plain) = bodies(&mut cache, &history, &ctx("other", auto));
        assert_eq!(cached, plain);
    }

    #[test]
    fn a_rewind_or_a_completed_front_rebuilds() {
        let mut cache = OutboundCache::default();
        let context = ctx("m", "<c/>");
        let mut history = vec![user("one"), Message::assistant("a".into(), vec![], "t")];
        bodies(&mut cache, &history, &context);
        // Rewound to the first prompt, then a different answer.
        history.truncate(1);
        history.push(Message::assistant("b".into(), vec![], "t"));
        let (cached, plain) = bodies(&mut cache, &history, &context);
        assert_eq!(cached, plain);
        // A resumed session's parsed start arrives in front.
        history.insert(0, user("zero"));
        let (cached, plain) = bodies(&mut cache, &history, &context);
        assert_eq!(cached, plain);
    }

    #[test]
    fn a_compaction_rebuilds_from_its_summary() {
        let mut cache = OutboundCache::default();
        let context = ctx("m", "<c/>");
        let mut history = vec![
            user("old"),
            Message::assistant("a".into(), vec![], "t"),
            user("new"),
        ];
        bodies(&mut cache, &history, &context);
        let mut notice = Message::notice(NoticeKind::Compacted, "compacted".into(), None);
        notice.meta.compaction = Some(Box::new(crate::engine::history::CompactionRecord {
            boundary: history[2].id.clone(),
            summary: "they asked".into(),
        }));
        history.push(notice);
        history.push(Message::assistant("b".into(), vec![], "t"));
        let (cached, plain) = bodies(&mut cache, &history, &context);
        assert_eq!(cached, plain);
        assert!(String::from_utf8(cached)
            .unwrap()
            .contains("compacted-history"));
    }
}
