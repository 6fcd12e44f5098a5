//! `protocol.md` is checked against the wire types in `src/protocol`, so the two cannot drift apart.
//!
//! The document marks every example with its fence's info string: `json request M`, `json response M`,
//! `json event T` (a whole `session/event` notification) and `json error` (a whole error response).
//! These tests extract every block and fail when:
//! - a method of `method::ALL` or an event type of `EVENT_TYPES` has no `## Method`/`## Event` section, or
//!   its section has no example (a method needs a request and a response, an event one notification);
//! - an example does not decode into its Rust type, or re-encoding the decoded value does not give back the
//!   same JSON (so every documented field is a real field and no required field is missing);
//! - a `session/load` example's `messages` differ in shape from what `session::display::display_history` builds (a
//!   member it never writes, one it always writes missing, a wrong JSON type), or its `pending` holds
//!   anything but `approvalRequested`/`questionAsked` events;
//! - no example of a type shows one of its fields, optional ones included (checked against a value with
//!   every field set, built below: adding a field to a wire type breaks the build here until it is
//!   documented and exemplified);
//! - an error example's `data.kind` is not an `ErrorKind`, or its `code` is not `kind.code()`;
//! - an `ErrorKind` (or a value of another wire enum) is never mentioned in the document.
//!
//! Run with `cargo test --test it -- protocol_doc::`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tandem::engine::history;
use tandem::protocol::*;

// ---------------------------------------------------------------------------------------------
// Reading the document

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Section {
    /// Before the first `## ` heading.
    Preamble,
    Method(String),
    Event(String),
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Request(String),
    Response(String),
    Event(String),
    Error,
}

#[derive(Debug, Clone)]
struct Block {
    /// 1-based line of the opening fence, for messages.
    line: usize,
    info: String,
    body: String,
    section: Section,
}

#[derive(Debug, Clone)]
struct Example {
    line: usize,
    kind: Kind,
    value: Value,
    section: Section,
}

struct Doc {
    text: String,
    blocks: Vec<Block>,
    /// The `## ` headings, in order.
    sections: Vec<Section>,
    /// For each `## Method` section: the text of its `**Errors:**` paragraph.
    errors_lines: BTreeMap<String, String>,
}

impl Doc {
    fn load() -> Doc {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol.md");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        Doc::parse(text)
    }

    fn parse(text: String) -> Doc {
        let mut blocks = Vec::new();
        let mut sections = Vec::new();
        let mut errors_lines = BTreeMap::new();
        let mut section = Section::Preamble;
        let mut open: Option<(usize, String, String)> = None;
        let mut in_errors = false;
        for (index, line) in text.lines().enumerate() {
            if let Some((start, info, body)) = open.as_mut() {
                if line.trim_end() == "```" {
                    blocks.push(Block {
                        line: *start,
                        info: info.clone(),
                        body: std::mem::take(body),
                        section: section.clone(),
                    });
                    open = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
                continue;
            }
            if let Some(info) = line.strip_prefix("```") {
                open = Some((index + 1, info.trim().to_owned(), String::new()));
                in_errors = false;
                continue;
            }
            if let Some(heading) = line.strip_prefix("## ") {
                section = parse_heading(heading.trim());
                sections.push(section.clone());
                in_errors = false;
                continue;
            }
            if line.trim().is_empty() {
                in_errors = false;
                continue;
            }
            if let Section::Method(m) = &section {
                if line.starts_with("**Errors:**") {
                    in_errors = true;
                }
                if in_errors {
                    let entry: &mut String = errors_lines.entry(m.clone()).or_default();
                    entry.push_str(line);
                    entry.push('\n');
                }
            }
        }
        assert!(
            open.is_none(),
            "protocol.md: a fenced block is never closed"
        );
        Doc {
            text,
            blocks,
            sections,
            errors_lines,
        }
    }

    /// Every `json …` block, classified and parsed. Problems with the blocks themselves go to `failures`.
    fn examples(&self, failures: &mut Vec<String>) -> Vec<Example> {
        let mut out = Vec::new();
        for block in &self.blocks {
            let words: Vec<&str> = block.info.split_whitespace().collect();
            if words.first().map(|w| w.starts_with("json")) != Some(true) {
                continue;
            }
            let at = format!("protocol.md:{} (```{})", block.line, block.info);
            let kind = match words.as_slice() {
                ["json", "request", m] => Kind::Request((*m).to_owned()),
                ["json", "response", m] => Kind::Response((*m).to_owned()),
                ["json", "event", t] => Kind::Event((*t).to_owned()),
                ["json", "error"] => Kind::Error,
                _ => {
                    failures.push(format!(
                        "{at}: unknown info string; use `json request M`, `json response M`, `json event T` or `json error`"
                    ));
                    continue;
                }
            };
            match &kind {
                Kind::Request(m) | Kind::Response(m) if !method::ALL.contains(&m.as_str()) => {
                    failures.push(format!("{at}: `{m}` is not a method in method::ALL"));
                    continue;
                }
                Kind::Event(t) if !EVENT_TYPES.contains(&t.as_str()) => {
                    failures.push(format!("{at}: `{t}` is not an event type in EVENT_TYPES"));
                    continue;
                }
                _ => {}
            }
            // An example inside a method's or an event's own section must be about that one.
            match (&kind, &block.section) {
                (Kind::Request(m) | Kind::Response(m), Section::Method(s)) if m != s => {
                    failures.push(format!(
                        "{at}: an example for `{m}` inside the section of `{s}`"
                    ));
                }
                (Kind::Event(t), Section::Event(s)) if t != s => {
                    failures.push(format!("{at}: a `{t}` example inside the section of `{s}`"));
                }
                _ => {}
            }
            match serde_json::from_str::<Value>(&block.body) {
                Ok(value) => out.push(Example {
                    line: block.line,
                    kind,
                    value,
                    section: block.section.clone(),
                }),
                Err(e) => failures.push(format!("{at}: not valid JSON: {e}")),
            }
        }
        out
    }
}

fn parse_heading(heading: &str) -> Section {
    fn quoted(rest: &str) -> Option<String> {
        let inner = rest.strip_prefix('`')?.strip_suffix('`')?;
        (!inner.is_empty() && !inner.contains('`')).then(|| inner.to_owned())
    }
    if let Some(name) = heading.strip_prefix("Method ").and_then(quoted) {
        return Section::Method(name);
    }
    if let Some(name) = heading.strip_prefix("Event ").and_then(quoted) {
        return Section::Event(name);
    }
    Section::Other(heading.to_owned())
}

fn check(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "protocol.md and src/protocol disagree:\n- {}",
        failures.join("\n- ")
    );
}

// ---------------------------------------------------------------------------------------------
// Decoding helpers

/// Decode `value` as `T` and require that encoding it again gives the same JSON.
fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<T, String> {
    let parsed: T = serde_json::from_value(value.clone()).map_err(|e| {
        format!(
            "does not decode into {}: {e}",
            std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("?")
        )
    })?;
    let again = serde_json::to_value(&parsed).map_err(|e| e.to_string())?;
    if &again != value {
        return Err(format!(
            "re-encoding the decoded {} gives different JSON (a field the type does not have, or a default written out):\n    doc:  {value}\n    code: {again}",
            std::any::type_name::<T>().rsplit("::").next().unwrap_or("?")
        ));
    }
    Ok(parsed)
}

fn envelope(value: &Value, what: &str) -> Result<serde_json::Map<String, Value>, String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("a {what} must be a JSON object"))?;
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(format!("a {what} needs \"jsonrpc\": \"2.0\""));
    }
    Ok(object.clone())
}

fn allow_keys(object: &serde_json::Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("unexpected member `{k}` (allowed: {allowed:?})")),
        None => Ok(()),
    }
}

/// The params of a request for `m`, checked against its params type.
fn check_params(m: &str, params: &Value) -> Result<(), String> {
    match m {
        method::INITIALIZE => {
            let p: InitializeParams = round_trip(params)?;
            if p.protocol_version != PROTOCOL_VERSION {
                return Err(format!(
                    "protocolVersion {} but the server speaks {PROTOCOL_VERSION}",
                    p.protocol_version
                ));
            }
        }
        method::SESSION_NEW => {
            round_trip::<SessionNewParams>(params)?;
        }
        method::SESSION_LIST => {
            round_trip::<SessionListParams>(params)?;
        }
        method::SESSION_LOAD => {
            round_trip::<SessionLoadParams>(params)?;
        }
        method::SESSION_ATTACH => {
            round_trip::<SessionAttachParams>(params)?;
        }
        method::STOP | method::RETRY => {
            round_trip::<SessionIdParams>(params)?;
        }
        method::PROMPT => {
            round_trip::<PromptParams>(params)?;
        }
        method::STEER => {
            round_trip::<SteerParams>(params)?;
        }
        method::APPROVE => {
            round_trip::<ApproveParams>(params)?;
        }
        method::ANSWER => {
            round_trip::<AnswerParams>(params)?;
        }
        method::SWITCH_MODEL => {
            round_trip::<SwitchModelParams>(params)?;
        }
        method::SET_MODE => {
            round_trip::<SetModeParams>(params)?;
        }
        method::SET_NETWORK_ACCESS => {
            round_trip::<SetNetworkAccessParams>(params)?;
        }
        method::MCP_STATUS => {
            round_trip::<SessionIdParams>(params)?;
        }
        method::MCP_TRUST => {
            round_trip::<McpTrustParams>(params)?;
        }
        method::TURN_DIFF => {
            round_trip::<TurnDiffParams>(params)?;
        }
        method::SESSION_CHECKPOINTS
        | method::SESSION_DELETE
        | method::COMMANDS_LIST
        | method::HOOKS_LIST
        | method::HOOKS_TRUST => {
            round_trip::<SessionIdParams>(params)?;
        }
        method::SESSION_REWIND => {
            round_trip::<RewindParams>(params)?;
        }
        method::SESSION_FORK => {
            round_trip::<ForkParams>(params)?;
        }
        method::SHUTDOWN | method::MODELS_LIST => {
            if params != &json!({}) {
                return Err(format!("{m} takes no params"));
            }
        }
        other => {
            return Err(format!(
                "no params type is mapped for `{other}`; add it to check_params in tests/it/protocol_doc.rs"
            ))
        }
    }
    Ok(())
}

/// The result of a response to `m`, checked against its result type.
fn check_result(m: &str, result: &Value) -> Result<(), String> {
    match m {
        method::INITIALIZE => {
            let r: InitializeResult = round_trip(result)?;
            if r.protocol_version != PROTOCOL_VERSION {
                return Err(format!(
                    "protocolVersion {} but the server speaks {PROTOCOL_VERSION}",
                    r.protocol_version
                ));
            }
            if !r.models.iter().any(|model| model.id == r.default_model) {
                return Err("defaultModel is not one of the models".into());
            }
        }
        method::MODELS_LIST => {
            let r: ModelsListResult = round_trip(result)?;
            if !r.models.iter().any(|model| model.id == r.default_model) {
                return Err("defaultModel is not one of the models".into());
            }
        }
        method::SESSION_NEW => {
            round_trip::<SessionNewResult>(result)?;
        }
        method::SESSION_LIST => {
            round_trip::<SessionListResult>(result)?;
        }
        method::SESSION_LOAD => {
            let r: SessionLoadResult = round_trip(result)?;
            check_load_result(&r)?;
        }
        method::PROMPT | method::RETRY => {
            round_trip::<PromptResult>(result)?;
        }
        method::STOP => {
            round_trip::<StopResult>(result)?;
        }
        method::STEER => {
            let r: SteerResult = round_trip(result)?;
            if !r.queued {
                return Err("steer answers {queued: true} or an error".into());
            }
        }
        method::APPROVE
        | method::ANSWER
        | method::SET_MODE
        | method::MCP_TRUST
        | method::HOOKS_TRUST
        | method::SESSION_ATTACH
        | method::SESSION_DELETE => {
            round_trip::<EmptyResult>(result)?;
        }
        method::COMMANDS_LIST => {
            round_trip::<CommandsListResult>(result)?;
        }
        method::HOOKS_LIST => {
            round_trip::<HooksListResult>(result)?;
        }
        method::TURN_DIFF => {
            round_trip::<TurnDiffResult>(result)?;
        }
        method::SESSION_CHECKPOINTS => {
            round_trip::<CheckpointsResult>(result)?;
        }
        method::SESSION_REWIND => {
            round_trip::<RewindResult>(result)?;
        }
        method::SESSION_FORK => {
            round_trip::<ForkResult>(result)?;
        }
        method::MCP_STATUS => {
            round_trip::<McpStatusResult>(result)?;
        }
        method::SET_NETWORK_ACCESS => {
            round_trip::<SetNetworkAccessResult>(result)?;
        }
        method::SWITCH_MODEL => {
            round_trip::<SwitchModelResult>(result)?;
        }
        method::SHUTDOWN => {
            if !result.is_null() {
                return Err("shutdown's result is null".into());
            }
        }
        other => {
            return Err(format!(
                "no result type is mapped for `{other}`; add it to check_result in tests/it/protocol_doc.rs"
            ))
        }
    }
    Ok(())
}

/// A history with every kind of message and every optional member, in the shape the store keeps it;
/// `display_history` turns it into the `messages` of `session/load`. The doc's examples are checked
/// against what the code builds from it, so a member added to the display breaks the coverage check
/// until an example shows it.
fn full_history() -> Vec<history::Message> {
    use history::{Message, Part, ResultStatus, Source, ToolCallRecord, UsageRecord};
    let turn = "t_1";
    let mut prompt = Message::user(
        vec![
            Part::Text {
                text: "look".into(),
            },
            Part::Image {
                mime_type: "image/png".into(),
                data: "AA==".into(),
            },
            Part::Document {
                mime_type: "application/pdf".into(),
                data: "JVBERi0=".into(),
                name: Some("spec.pdf".into()),
            },
        ],
        Source::User,
        Some(turn),
    );
    prompt.meta.ts = 1;
    let plain = Message::user(
        vec![Part::Text {
            text: "plain".into(),
        }],
        Source::User,
        Some(turn),
    );
    let steering = Message::user(
        vec![Part::Text {
            text: "steer".into(),
        }],
        Source::Steering,
        Some(turn),
    );
    let reminder = Message::user(
        vec![Part::Text {
            text: "hidden".into(),
        }],
        Source::Reminder,
        Some(turn),
    );
    let edit = ToolCallRecord {
        id: "c1".into(),
        name: "write_file".into(),
        arguments: r#"{"path":"a","content":"b"}"#.into(),
        extras: Default::default(),
    };
    let open = ToolCallRecord {
        id: "c2".into(),
        name: "read_file".into(),
        arguments: "not json".into(),
        extras: Default::default(),
    };
    let mut assistant = Message::assistant("text".into(), vec![edit.clone(), open], turn);
    assistant.meta.reasoning = Some("why".into());
    assistant.meta.usage = Some(Box::new(UsageRecord {
        model: "m".into(),
        input_tokens: 1,
        output_tokens: 1,
        cached_tokens: Some(1),
    }));
    let bare = Message::assistant(String::new(), Vec::new(), turn);
    let mut result = Message::tool_result(&edit, ResultStatus::Completed, "ok".into(), turn);
    result.meta.diff = tandem::engine::history::StoredJson::from_serialize(&[DiffEntry {
        path: "a".into(),
        old_text: None,
        new_text: "b".into(),
        unified: "+b".into(),
    }]);
    let notice = Message::notice(NoticeKind::Error, "n".into(), Some(turn));
    let idle_notice = Message::notice(NoticeKind::ModelSwitch, "n".into(), None);
    vec![
        prompt,
        plain,
        steering,
        reminder,
        assistant,
        bare,
        result,
        notice,
        idle_notice,
    ]
}

/// What the server sends for `history`, decoded into the documented wire type: the server
/// serializes borrowed twins of the wire types, and this fails if the two ever differ.
fn displayed(history: &[history::Message]) -> Vec<DisplayMessage> {
    let sent = serde_json::to_value(tandem::session::display::display_history(history))
        .expect("display messages serialize");
    round_trip(&sent).unwrap_or_else(|e| panic!("the display history {e}"))
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// For each `role` of the display history (and for `toolCalls` entries, under `toolCalls[]`): the
/// members `display_history` always writes, and every member it can write with the JSON types seen.
struct DisplayShape {
    always: BTreeMap<String, BTreeSet<String>>,
    types: BTreeMap<String, BTreeMap<String, BTreeSet<&'static str>>>,
}

fn display_shape() -> DisplayShape {
    let mut always: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut types: BTreeMap<String, BTreeMap<String, BTreeSet<&'static str>>> = BTreeMap::new();
    let mut note = |group: String, object: &serde_json::Map<String, Value>| {
        let keys: BTreeSet<String> = object.keys().cloned().collect();
        always
            .entry(group.clone())
            .and_modify(|a| *a = a.intersection(&keys).cloned().collect())
            .or_insert(keys);
        let slot = types.entry(group).or_default();
        for (key, value) in object {
            slot.entry(key.clone())
                .or_default()
                .insert(json_type(value));
        }
    };
    for message in tandem::session::display::display_history(&full_history()) {
        let message = serde_json::to_value(&message).expect("display messages serialize");
        let object = message.as_object().expect("display messages are objects");
        let role = object["role"]
            .as_str()
            .expect("role is a string")
            .to_owned();
        for call in object
            .get("toolCalls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            note(
                "toolCalls[]".into(),
                call.as_object().expect("calls are objects"),
            );
        }
        note(role, object);
    }
    DisplayShape { always, types }
}

fn check_object_against(
    shape: &DisplayShape,
    group: &str,
    object: &serde_json::Map<String, Value>,
) -> Result<(), String> {
    let types = shape
        .types
        .get(group)
        .ok_or_else(|| format!("`{group}` is not a kind of display message"))?;
    for key in &shape.always[group] {
        if !object.contains_key(key) {
            return Err(format!("a `{group}` entry always has `{key}`"));
        }
    }
    for (key, value) in object {
        let Some(allowed) = types.get(key) else {
            return Err(format!("a `{group}` entry has no member `{key}`"));
        };
        if !allowed.contains(json_type(value)) {
            return Err(format!(
                "`{group}.{key}` is {}, but the server writes {allowed:?}",
                json_type(value)
            ));
        }
    }
    Ok(())
}

/// The `messages` and `pending` of a `session/load` result, against what the server builds.
fn check_load_result(result: &SessionLoadResult) -> Result<(), String> {
    let shape = display_shape();
    for message in &result.messages {
        let message = serde_json::to_value(message).map_err(|e| e.to_string())?;
        let object = message.as_object().ok_or("a message must be an object")?;
        let role = object
            .get("role")
            .and_then(Value::as_str)
            .ok_or("a message needs a string `role`")?;
        check_object_against(&shape, role, object)?;
        if !object["id"].as_str().is_some_and(|id| id.starts_with("m_")) {
            return Err("message ids look like `m_…`".into());
        }
        for call in object
            .get("toolCalls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let call = call.as_object().ok_or("a tool call must be an object")?;
            check_object_against(&shape, "toolCalls[]", call)?;
            if let Some(status) = call.get("status") {
                let status: ToolStatus = serde_json::from_value(status.clone())
                    .map_err(|e| format!("tool call status: {e}"))?;
                if status == ToolStatus::Running {
                    return Err("a displayed tool call is never `running`".into());
                }
                if !call.contains_key("result") {
                    return Err("a tool call with a status has a result".into());
                }
            }
            if let Some(diff) = call.get("diff") {
                round_trip::<Vec<DiffEntry>>(diff)?;
            }
        }
        if let Some(kind) = object.get("kind") {
            serde_json::from_value::<NoticeKind>(kind.clone())
                .map_err(|e| format!("notice kind: {e}"))?;
        }
        if let Some(source) = object.get("source") {
            if source != "user" && source != "steering" {
                return Err(format!(
                    "user `source` is `user` or `steering`, not {source}"
                ));
            }
        }
        if let Some(usage) = object.get("usage") {
            let usage = usage.as_object().ok_or("usage must be an object")?;
            allow_keys(usage, &["model", "inputTokens", "outputTokens"])?;
        }
        for image in object
            .get("images")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let image = image.as_object().ok_or("an image must be an object")?;
            allow_keys(image, &["mimeType", "data"])?;
        }
        for document in object
            .get("documents")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let document = document.as_object().ok_or("a document must be an object")?;
            allow_keys(document, &["mimeType", "data", "name"])?;
        }
    }
    for entry in &result.pending {
        let event: Event = round_trip(entry)?;
        if !matches!(
            event,
            Event::ApprovalRequested { .. } | Event::QuestionAsked { .. }
        ) {
            return Err(format!(
                "`pending` holds approvalRequested and questionAsked events, not {}",
                event.type_name()
            ));
        }
    }
    if result.state == ConversationState::Idle && !result.pending.is_empty() {
        return Err("an idle session has nothing pending".into());
    }
    Ok(())
}

/// A whole error response.
fn check_error_response(value: &Value) -> Result<ErrorKind, String> {
    let object = envelope(value, "response")?;
    allow_keys(&object, &["jsonrpc", "id", "error"])?;
    match object.get("id") {
        Some(Value::Null | Value::Number(_) | Value::String(_)) => {}
        _ => return Err("an error response needs an `id` (null when unreadable)".into()),
    }
    let error = object.get("error").ok_or("no `error` member")?;
    let parsed: RpcErrorObject = round_trip(error)?;
    if parsed.code != parsed.data.kind.code() {
        return Err(format!(
            "code {} but kind {:?} goes with {}",
            parsed.code,
            parsed.data.kind,
            parsed.data.kind.code()
        ));
    }
    if parsed.message.trim().is_empty() {
        return Err("an error needs a message".into());
    }
    Ok(parsed.data.kind)
}

fn check_request(m: &str, value: &Value) -> Result<(), String> {
    let object = envelope(value, "request")?;
    allow_keys(&object, &["jsonrpc", "id", "method", "params"])?;
    if object.get("method") != Some(&json!(m)) {
        return Err(format!("`method` must be \"{m}\""));
    }
    match object.get("id") {
        Some(Value::Number(_) | Value::String(_)) => {}
        _ => return Err("a request example needs a number or string `id`".into()),
    }
    let params = match object.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(p) => p.clone(),
    };
    check_params(m, &params)
}

/// A response to `m`: a result, or an error whose kind the section's **Errors:** line lists.
fn check_response(doc: &Doc, m: &str, value: &Value) -> Result<(), String> {
    let object = envelope(value, "response")?;
    if object.contains_key("error") {
        let kind = check_error_response(value)?;
        let listed = doc.errors_lines.get(m).map(String::as_str).unwrap_or("");
        let name = serde_json::to_value(kind).unwrap();
        let name = name.as_str().unwrap_or_default();
        if !listed.contains(&format!("`{name}`")) {
            return Err(format!(
                "an error of kind `{name}`, which the section's **Errors:** line does not list"
            ));
        }
        return Ok(());
    }
    allow_keys(&object, &["jsonrpc", "id", "result"])?;
    match object.get("id") {
        Some(Value::Number(_) | Value::String(_)) => {}
        _ => {
            return Err("a response example needs the number or string `id` of its request".into())
        }
    }
    let result = object
        .get("result")
        .ok_or("no `result` (or `error`) member")?;
    check_result(m, result)
}

/// A whole `session/event` notification of type `t`; returns the decoded params.
fn check_event(t: &str, value: &Value) -> Result<SessionEventParams, String> {
    let object = envelope(value, "notification")?;
    allow_keys(&object, &["jsonrpc", "method", "params"])?;
    if object.get("method") != Some(&json!(method::SESSION_EVENT)) {
        return Err(format!("`method` must be \"{}\"", method::SESSION_EVENT));
    }
    let params = object.get("params").ok_or("no `params`")?;
    let parsed: SessionEventParams = round_trip(params)?;
    if parsed.event.type_name() != t {
        return Err(format!(
            "the event decodes as `{}`, not `{t}`",
            parsed.event.type_name()
        ));
    }
    if parsed.seq == 0 {
        return Err("seq starts at 1".into());
    }
    Ok(parsed)
}

// ---------------------------------------------------------------------------------------------
// Values with every field set, for the coverage check. Struct literals on purpose: a field added to a
// wire type breaks the build here, which is the reminder to document it and show it in an example.

fn full_events() -> Vec<Event> {
    let diff = || {
        Some(vec![DiffEntry {
            path: "a.txt".into(),
            old_text: Some("old\n".into()),
            new_text: "new\n".into(),
            unified: "-old\n+new\n".into(),
        }])
    };
    let events = vec![
        Event::TurnStarted {
            model: "m".into(),
            prompt: Some("p".into()),
        },
        Event::AssistantDelta { text: "t".into() },
        Event::ReasoningDelta { text: "t".into() },
        Event::AssistantMessage {
            text: "t".into(),
            reasoning: Some("r".into()),
        },
        Event::ToolCall {
            tool_call_id: "c".into(),
            name: "read_file".into(),
            kind: ToolKind::Read,
            title: "Read a".into(),
            arguments: json!({}),
            locations: Some(vec![Location {
                path: "/a".into(),
                line: Some(1),
            }]),
            mcp: Some(McpToolRef {
                server: "docs".into(),
                tool: "search".into(),
            }),
        },
        Event::McpStatus {
            server: "docs".into(),
            status: McpServerState::Failed,
            tools: Some(vec!["mcp__docs__search".into()]),
            error: Some("e".into()),
        },
        Event::ApprovalRequested {
            request_id: "r".into(),
            tool_call_id: "c".into(),
            name: "shell".into(),
            kind: ToolKind::Execute,
            title: "Run".into(),
            reason: "why".into(),
            arguments: json!({}),
            diff: diff(),
            command: Some("ls".into()),
            cwd: Some("/".into()),
            mcp: Some(McpToolRef {
                server: "docs".into(),
                tool: "search".into(),
            }),
            options: vec![ApprovalOption {
                decision: Decision::AlwaysCommand,
                label: "l".into(),
                command_prefix: Some("ls".into()),
            }],
            arguments_digest: "d".into(),
        },
        Event::ApprovalResolved {
            request_id: "r".into(),
            decision: Decision::Once,
        },
        Event::QuestionAsked {
            request_id: "r".into(),
            tool_call_id: "c".into(),
            question: "q".into(),
            choices: Some(vec!["a".into()]),
            plan: Some("p".into()),
        },
        Event::ToolCallUpdate {
            tool_call_id: "c".into(),
            status: ToolStatus::Completed,
            output: Some("o".into()),
            result: Some("r".into()),
            diff: diff(),
        },
        Event::SteeringApplied { text: "t".into() },
        // `summary` on `compacting` is never set by this build (engine/turn/compact.rs sends it empty, the
        // summary comes with `compacted`), so no real example can show it.
        Event::Compacting { summary: None },
        Event::Compacted {
            summary: Some("s".into()),
        },
        Event::ModelSwitched {
            from: "a".into(),
            to: "b".into(),
            warning: Some("w".into()),
        },
        Event::Notice {
            kind: NoticeKind::Warning,
            text: "t".into(),
        },
        Event::Usage {
            model: "m".into(),
            input_tokens: 1,
            output_tokens: 1,
            cached_tokens: Some(1),
        },
        Event::TurnEnded {
            reason: TurnEndReason::Error,
            error: Some(TurnError {
                message: "m".into(),
                retriable: true,
            }),
        },
        Event::StreamTruncated {
            from_seq: 1,
            dropped: 2,
            dropped_bytes: 3,
        },
        Event::Rewound {
            restore: RestoreScope::Both,
            files: vec!["a".into()],
        },
        Event::Plan {
            entries: vec![PlanEntry {
                content: "c".into(),
                status: PlanStatus::InProgress,
            }],
        },
        Event::HookRan {
            event: "PreToolUse".into(),
            command: "c".into(),
            exit_code: Some(2),
            duration_ms: 1,
            blocked: true,
            tool_call_id: Some("c".into()),
        },
    ];
    // Exhaustive on purpose: a new variant must be added above.
    for event in &events {
        match event {
            Event::McpStatus { .. }
            | Event::TurnStarted { .. }
            | Event::AssistantDelta { .. }
            | Event::ReasoningDelta { .. }
            | Event::AssistantMessage { .. }
            | Event::ToolCall { .. }
            | Event::ApprovalRequested { .. }
            | Event::ApprovalResolved { .. }
            | Event::QuestionAsked { .. }
            | Event::ToolCallUpdate { .. }
            | Event::SteeringApplied { .. }
            | Event::Compacting { .. }
            | Event::Compacted { .. }
            | Event::ModelSwitched { .. }
            | Event::Notice { .. }
            | Event::Usage { .. }
            | Event::TurnEnded { .. }
            | Event::StreamTruncated { .. }
            | Event::Rewound { .. }
            | Event::HookRan { .. }
            | Event::Plan { .. } => {}
        }
    }
    events
}

/// Every field each method's params can carry (several values where the shape has alternatives).
fn full_params(m: &str) -> Vec<Value> {
    let v = |x: &dyn erased::Ser| x.value();
    match m {
        method::INITIALIZE => vec![v(&InitializeParams {
            protocol_version: 1,
            client_info: Some(ClientInfo {
                name: "n".into(),
                version: Some("v".into()),
            }),
            capabilities: Some(ClientCapabilities {
                approvals: Some(true),
            }),
        })],
        method::SESSION_NEW => vec![v(&SessionNewParams {
            cwd: "/".into(),
            model: Some("m".into()),
            mode: Some(Mode::Ask),
            mcp_servers: Some(vec![json!({"name": "n"})]),
        })],
        method::MCP_STATUS => vec![v(&SessionIdParams {
            session_id: "s".into(),
        })],
        method::MCP_TRUST => vec![v(&McpTrustParams {
            session_id: "s".into(),
            server: "n".into(),
        })],
        method::TURN_DIFF => vec![v(&TurnDiffParams {
            session_id: "s".into(),
            turn_id: "t".into(),
        })],
        method::SESSION_CHECKPOINTS
        | method::SESSION_DELETE
        | method::COMMANDS_LIST
        | method::HOOKS_LIST
        | method::HOOKS_TRUST => vec![v(&SessionIdParams {
            session_id: "s".into(),
        })],
        method::SESSION_REWIND => vec![v(&RewindParams {
            session_id: "s".into(),
            turn_id: "t".into(),
            restore: RestoreScope::Both,
            force: Some(true),
        })],
        method::SESSION_FORK => vec![v(&ForkParams {
            session_id: "s".into(),
            turn_id: Some("t".into()),
        })],
        method::SESSION_LIST => vec![v(&SessionListParams {
            cwd: Some("/".into()),
        })],
        method::SESSION_ATTACH => vec![v(&SessionAttachParams {
            session_id: "s".into(),
            from_seq: Some(12),
        })],
        method::SESSION_LOAD => vec![
            v(&SessionLoadParams {
                session_id: "s".into(),
                cursor: None,
            }),
            v(&SessionLoadParams {
                session_id: "s".into(),
                cursor: Some("12".into()),
            }),
        ],
        method::STOP | method::RETRY => vec![v(&SessionIdParams {
            session_id: "s".into(),
        })],
        method::PROMPT => vec![
            v(&PromptParams {
                session_id: "s".into(),
                content: PromptContent::Text("t".into()),
            }),
            v(&PromptParams {
                session_id: "s".into(),
                content: PromptContent::Parts(vec![
                    ContentPart::Text { text: "t".into() },
                    ContentPart::Image {
                        mime_type: "image/png".into(),
                        data: "AA==".into(),
                    },
                    ContentPart::Document {
                        mime_type: "application/pdf".into(),
                        data: "JVBERi0=".into(),
                        name: Some("spec.pdf".into()),
                    },
                ]),
            }),
        ],
        method::STEER => vec![v(&SteerParams {
            session_id: "s".into(),
            text: "t".into(),
        })],
        method::APPROVE => vec![v(&ApproveParams {
            session_id: "s".into(),
            request_id: "r".into(),
            decision: Decision::Deny,
            message: Some("m".into()),
            edited_content: Some("e".into()),
            arguments_digest: Some("d".into()),
        })],
        method::ANSWER => vec![v(&AnswerParams {
            session_id: "s".into(),
            request_id: "r".into(),
            answer: "a".into(),
        })],
        method::SWITCH_MODEL => vec![v(&SwitchModelParams {
            session_id: "s".into(),
            model: "m".into(),
        })],
        method::SET_MODE => vec![v(&SetModeParams {
            session_id: "s".into(),
            mode: Mode::Plan,
        })],
        method::SET_NETWORK_ACCESS => vec![v(&SetNetworkAccessParams {
            session_id: "s".into(),
            allow: true,
        })],
        _ => vec![],
    }
}

fn full_model_info() -> ModelInfo {
    ModelInfo {
        id: "m".into(),
        provider: "p".into(),
        name: "n".into(),
        context_window: 1,
        max_output_tokens: Some(1),
        vision: false,
        pdf: false,
        reasoning: false,
        parallel_tool_calls: true,
    }
}

/// Every field each method's result can carry; none for methods answered only with errors.
fn full_results(m: &str) -> Vec<Value> {
    let v = |x: &dyn erased::Ser| x.value();
    match m {
        method::INITIALIZE => vec![v(&InitializeResult {
            protocol_version: 1,
            server_info: ServerInfo {
                name: "tandem".into(),
                version: "0".into(),
            },
            capabilities: ServerCapabilities {
                session_store: true,
                framing: Framing::Ndjson,
                image_prompts: true,
                document_prompts: true,
                attach: Some(AttachInfo {
                    url: "ws://127.0.0.1:7777".into(),
                    token_file: "/home/ada/.local/share/tandem/attach-token".into(),
                }),
            },
            models: vec![full_model_info()],
            default_model: "m".into(),
        })],
        method::MODELS_LIST => vec![v(&ModelsListResult {
            models: vec![full_model_info()],
            default_model: "m".into(),
        })],
        method::SESSION_NEW => vec![v(&SessionNewResult {
            session_id: "s".into(),
            model: "m".into(),
            mode: Mode::Ask,
        })],
        method::SESSION_LIST => vec![v(&SessionListResult {
            sessions: vec![SessionSummary {
                session_id: "s".into(),
                cwd: "/".into(),
                title: Some("t".into()),
                model: "m".into(),
                updated_at: 1,
            }],
        })],
        method::SESSION_LOAD => vec![v(&SessionLoadResult {
            session_id: "s".into(),
            cwd: "/".into(),
            model: "m".into(),
            mode: Mode::Ask,
            state: ConversationState::Running,
            network_access: true,
            messages: displayed(&full_history()),
            // The members every approval shows; its optional ones are covered by the event checks.
            pending: vec![json!({
                "type": "approvalRequested", "requestId": "r", "toolCallId": "c", "name": "n",
                "kind": "edit", "title": "t", "reason": "r", "arguments": {},
                "options": [{"decision": "once", "label": "l"}],
            })],
            usage: vec![UsageTotal {
                model: "m".into(),
                input_tokens: 1,
                output_tokens: 1,
                cached_tokens: 1,
            }],
            plan: vec![PlanEntry {
                content: "c".into(),
                status: PlanStatus::Pending,
            }],
            cursor: Some("12".into()),
        })],
        method::PROMPT => vec![v(&PromptResult {
            turn_id: Some("t".into()),
            command: Some(PromptCommand {
                name: "n".into(),
                output: Some("o".into()),
                session_id: Some("s".into()),
            }),
        })],
        method::COMMANDS_LIST => vec![v(&CommandsListResult {
            commands: vec![CommandEntry {
                name: "n".into(),
                description: "d".into(),
                argument_hint: Some("a".into()),
                source: CommandSource::Project,
            }],
        })],
        method::HOOKS_LIST => vec![v(&HooksListResult {
            hooks: vec![HookEntry {
                event: "Stop".into(),
                matcher: Some("m".into()),
                command: "c".into(),
                timeout: 1.0,
                source: HookSourceName::Project,
            }],
            project_files: vec!["f".into()],
            trusted: false,
        })],
        method::STOP => vec![v(&StopResult { stopped: true })],
        method::STEER => vec![v(&SteerResult { queued: true })],
        method::APPROVE
        | method::ANSWER
        | method::SET_MODE
        | method::MCP_TRUST
        | method::HOOKS_TRUST
        | method::SESSION_ATTACH
        | method::SESSION_DELETE => {
            vec![v(&EmptyResult {})]
        }
        method::TURN_DIFF => vec![v(&TurnDiffResult {
            files: vec![TurnFileDiff {
                path: "p".into(),
                change: FileChange::Modified,
                old_text: Some("a".into()),
                new_text: Some("b".into()),
                unified: "u".into(),
                binary: Some(true),
                not_captured: Some("n".into()),
            }],
        })],
        method::SESSION_CHECKPOINTS => vec![v(&CheckpointsResult {
            checkpoints: vec![Checkpoint {
                turn_id: "t".into(),
                prompt: "p".into(),
                created_at: 1,
                files: vec![CheckpointFile {
                    path: "p".into(),
                    change: FileChange::Added,
                }],
                files_restored: true,
            }],
        })],
        method::SESSION_REWIND => vec![v(&RewindResult {
            restored: vec!["p".into()],
            conflicts: vec![RewindConflict {
                path: "p".into(),
                reason: "r".into(),
            }],
            conversation_rewound: true,
        })],
        method::SESSION_FORK => vec![v(&ForkResult {
            session_id: "s".into(),
        })],
        method::MCP_STATUS => vec![v(&McpStatusResult {
            servers: vec![McpServerInfo {
                name: "n".into(),
                source: McpServerSource::Workspace,
                status: McpServerState::Ready,
                tools: vec!["t".into()],
                error: Some("e".into()),
            }],
        })],
        method::SWITCH_MODEL => vec![v(&SwitchModelResult {
            model: "m".into(),
            warning: Some("w".into()),
        })],
        method::SET_NETWORK_ACCESS => vec![v(&SetNetworkAccessResult { allow: true })],
        _ => vec![],
    }
}

/// Serialize through a trait object, so the tables above can mix types.
mod erased {
    pub trait Ser {
        fn value(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Ser for T {
        fn value(&self) -> serde_json::Value {
            serde_json::to_value(self).expect("serializable")
        }
    }
}

/// The member paths of a JSON value: `a`, `a.b`, `a[].c`. Free-form `arguments` are not descended into.
fn paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            for (key, child) in object {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                out.insert(path.clone());
                if key != "arguments" {
                    paths(child, &path, out);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn missing_paths(full: &[Value], shown: &[&Value]) -> Vec<String> {
    let mut want = BTreeSet::new();
    for value in full {
        paths(value, "", &mut want);
    }
    let mut have = BTreeSet::new();
    for value in shown {
        paths(value, "", &mut have);
    }
    want.difference(&have).cloned().collect()
}

// ---------------------------------------------------------------------------------------------
// Enumerations of the wire enums, each guarded by an exhaustive match.

fn all_error_kinds() -> Vec<ErrorKind> {
    use ErrorKind::*;
    let all = vec![
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        FrameTooLarge,
        Internal,
        NotInitialized,
        UnsupportedProtocolVersion,
        TurnInProgress,
        NoTurnRunning,
        UnknownSession,
        StaleApproval,
        UnknownModel,
        InvalidMode,
        InvalidCwd,
        RetryUnavailable,
        Unsupported,
        StoreUnavailable,
        SteeringQueueFull,
        UnknownTurn,
    ];
    for kind in &all {
        match kind {
            ParseError
            | InvalidRequest
            | MethodNotFound
            | InvalidParams
            | FrameTooLarge
            | Internal
            | NotInitialized
            | UnsupportedProtocolVersion
            | TurnInProgress
            | NoTurnRunning
            | UnknownSession
            | StaleApproval
            | UnknownModel
            | InvalidMode
            | InvalidCwd
            | RetryUnavailable
            | Unsupported
            | StoreUnavailable
            | SteeringQueueFull
            | UnknownTurn => {}
        }
    }
    all
}

/// `(enum name, wire value)` for every value of every other wire enum.
fn all_enum_values() -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    let mut add = |name: &'static str, values: Vec<Value>| {
        out.extend(values.into_iter().map(|v| (name, v)));
    };
    let to = |x: &dyn erased::Ser| x.value();

    let modes = [Mode::Ask, Mode::AutoEdit, Mode::Plan, Mode::FullAuto];
    for m in &modes {
        match m {
            Mode::Ask | Mode::AutoEdit | Mode::Plan | Mode::FullAuto => {}
        }
    }
    add("Mode", modes.iter().map(|x| to(x)).collect());

    let decisions = [
        Decision::Once,
        Decision::AlwaysTool,
        Decision::AlwaysCommand,
        Decision::Deny,
    ];
    for d in &decisions {
        match d {
            Decision::Once | Decision::AlwaysTool | Decision::AlwaysCommand | Decision::Deny => {}
        }
    }
    add("Decision", decisions.iter().map(|x| to(x)).collect());

    let kinds = [
        ToolKind::Read,
        ToolKind::Search,
        ToolKind::Edit,
        ToolKind::Delete,
        ToolKind::Move,
        ToolKind::Execute,
        ToolKind::Think,
        ToolKind::Fetch,
        ToolKind::Other,
    ];
    for k in &kinds {
        match k {
            ToolKind::Read
            | ToolKind::Search
            | ToolKind::Edit
            | ToolKind::Delete
            | ToolKind::Move
            | ToolKind::Execute
            | ToolKind::Think
            | ToolKind::Fetch
            | ToolKind::Other => {}
        }
    }
    add("ToolKind", kinds.iter().map(|x| to(x)).collect());

    let statuses = [
        ToolStatus::Running,
        ToolStatus::Completed,
        ToolStatus::Failed,
        ToolStatus::Denied,
        ToolStatus::Interrupted,
    ];
    for s in &statuses {
        match s {
            ToolStatus::Running
            | ToolStatus::Completed
            | ToolStatus::Failed
            | ToolStatus::Denied
            | ToolStatus::Interrupted => {}
        }
    }
    add("ToolStatus", statuses.iter().map(|x| to(x)).collect());

    let reasons = [
        TurnEndReason::Completed,
        TurnEndReason::Interrupted,
        TurnEndReason::Error,
        TurnEndReason::ContextExceeded,
        TurnEndReason::MaxIterations,
    ];
    for r in &reasons {
        match r {
            TurnEndReason::Completed
            | TurnEndReason::Interrupted
            | TurnEndReason::Error
            | TurnEndReason::ContextExceeded
            | TurnEndReason::MaxIterations => {}
        }
    }
    add("TurnEndReason", reasons.iter().map(|x| to(x)).collect());

    let mcp_states = [
        McpServerState::Starting,
        McpServerState::Ready,
        McpServerState::Failed,
        McpServerState::Exited,
        McpServerState::Untrusted,
    ];
    for s in &mcp_states {
        match s {
            McpServerState::Starting
            | McpServerState::Ready
            | McpServerState::Failed
            | McpServerState::Exited
            | McpServerState::Untrusted => {}
        }
    }
    add("McpServerState", mcp_states.iter().map(|x| to(x)).collect());
    let mcp_sources = [
        McpServerSource::Config,
        McpServerSource::Session,
        McpServerSource::Workspace,
    ];
    for s in &mcp_sources {
        match s {
            McpServerSource::Config | McpServerSource::Session | McpServerSource::Workspace => {}
        }
    }
    add(
        "McpServerSource",
        mcp_sources.iter().map(|x| to(x)).collect(),
    );

    let notices = [
        NoticeKind::Error,
        NoticeKind::Interrupted,
        NoticeKind::ModelSwitch,
        NoticeKind::Compacted,
        NoticeKind::Retrying,
        NoticeKind::Warning,
        NoticeKind::Network,
        NoticeKind::Rewound,
    ];
    for n in &notices {
        match n {
            NoticeKind::Error
            | NoticeKind::Interrupted
            | NoticeKind::ModelSwitch
            | NoticeKind::Compacted
            | NoticeKind::Retrying
            | NoticeKind::Warning
            | NoticeKind::Network
            | NoticeKind::Rewound => {}
        }
    }
    add("NoticeKind", notices.iter().map(|x| to(x)).collect());

    let plan = [
        PlanStatus::Pending,
        PlanStatus::InProgress,
        PlanStatus::Completed,
    ];
    for p in &plan {
        match p {
            PlanStatus::Pending | PlanStatus::InProgress | PlanStatus::Completed => {}
        }
    }
    add("PlanStatus", plan.iter().map(|x| to(x)).collect());
    let scopes = [
        RestoreScope::Files,
        RestoreScope::Conversation,
        RestoreScope::Both,
    ];
    add("RestoreScope", scopes.iter().map(|x| to(x)).collect());
    let changes = [FileChange::Added, FileChange::Modified, FileChange::Deleted];
    add("FileChange", changes.iter().map(|x| to(x)).collect());

    let states = [ConversationState::Idle, ConversationState::Running];
    for st in &states {
        match st {
            ConversationState::Idle | ConversationState::Running => {}
        }
    }
    add("ConversationState", states.iter().map(|x| to(x)).collect());

    let framings = [Framing::Ndjson, Framing::ContentLength];
    for f in &framings {
        match f {
            Framing::Ndjson | Framing::ContentLength => {}
        }
    }
    add("Framing", framings.iter().map(|x| to(x)).collect());
    out
}

// ---------------------------------------------------------------------------------------------
// The checks

#[test]
fn every_json_block_is_a_labelled_example() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    let examples = doc.examples(&mut failures);
    assert!(!examples.is_empty(), "protocol.md has no examples at all");
    check(failures);
}

#[test]
fn every_method_has_a_section_with_a_request_and_a_response() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    let examples = doc.examples(&mut failures);
    for m in method::ALL {
        let section = Section::Method((*m).to_owned());
        if !doc.sections.contains(&section) {
            failures.push(format!("method `{m}` has no `## Method `{m}`` section"));
            continue;
        }
        let here = |want: &dyn Fn(&Kind) -> bool| {
            examples
                .iter()
                .any(|e| e.section == section && want(&e.kind))
        };
        if !here(&|k| k == &Kind::Request((*m).to_owned())) {
            failures.push(format!(
                "method `{m}`: its section has no ```json request {m}``` example"
            ));
        }
        if !here(&|k| k == &Kind::Response((*m).to_owned())) {
            failures.push(format!(
                "method `{m}`: its section has no ```json response {m}``` example"
            ));
        }
    }
    for section in &doc.sections {
        match section {
            Section::Method(m) if !method::ALL.contains(&m.as_str()) => failures.push(format!(
                "section `## Method `{m}`` names no method in method::ALL"
            )),
            Section::Event(t) if !EVENT_TYPES.contains(&t.as_str()) => failures.push(format!(
                "section `## Event `{t}`` names no type in EVENT_TYPES"
            )),
            _ => {}
        }
    }
    let mut seen = BTreeSet::new();
    for section in &doc.sections {
        if matches!(section, Section::Method(_) | Section::Event(_)) && !seen.insert(section) {
            failures.push(format!("{section:?} appears twice"));
        }
    }
    check(failures);
}

#[test]
fn every_event_type_has_a_section_with_an_example() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    let examples = doc.examples(&mut failures);
    for t in EVENT_TYPES {
        let section = Section::Event((*t).to_owned());
        if !doc.sections.contains(&section) {
            failures.push(format!("event type `{t}` has no `## Event `{t}`` section"));
            continue;
        }
        if !examples
            .iter()
            .any(|e| e.section == section && e.kind == Kind::Event((*t).to_owned()))
        {
            failures.push(format!(
                "event type `{t}`: its section has no ```json event {t}``` example"
            ));
        }
    }
    // EVENT_TYPES and the Event enum list the same names.
    let from_enum: BTreeSet<&str> = full_events().iter().map(Event::type_name).collect();
    let listed: BTreeSet<&str> = EVENT_TYPES.iter().copied().collect();
    if from_enum != listed {
        failures.push(format!(
            "EVENT_TYPES {listed:?} and the Event enum {from_enum:?} disagree"
        ));
    }
    check(failures);
}

#[test]
fn request_examples_decode_into_their_params_types() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    for example in doc.examples(&mut failures) {
        if let Kind::Request(m) = &example.kind {
            if let Err(e) = check_request(m, &example.value) {
                failures.push(format!("protocol.md:{} (request {m}): {e}", example.line));
            }
        }
    }
    check(failures);
}

#[test]
fn response_examples_decode_into_their_result_types() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    let examples = doc.examples(&mut failures);
    for example in &examples {
        if let Kind::Response(m) = &example.kind {
            if let Err(e) = check_response(&doc, m, &example.value) {
                failures.push(format!("protocol.md:{} (response {m}): {e}", example.line));
            }
        }
    }
    // The first response of each method section answers a request of that section (same id), so a
    // reader can pair them; later responses may show other outcomes.
    for m in method::ALL {
        let section = &Section::Method((*m).to_owned());
        let in_section = |kind: Kind| {
            examples
                .iter()
                .filter(move |e| &e.section == section && e.kind == kind)
        };
        let Some(first) = in_section(Kind::Response((*m).to_owned())).next() else {
            continue;
        };
        let id = first.value.get("id");
        if !in_section(Kind::Request((*m).to_owned())).any(|r| r.value.get("id") == id) {
            failures.push(format!(
                "protocol.md:{} (response {m}): its id matches no request example in the section",
                first.line
            ));
        }
    }
    check(failures);
}

#[test]
fn event_examples_round_trip_through_session_event_params() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    let mut any_turn_id = false;
    let mut any_without_turn_id = false;
    for example in doc.examples(&mut failures) {
        if let Kind::Event(t) = &example.kind {
            match check_event(t, &example.value) {
                Ok(parsed) => {
                    any_turn_id |= parsed.turn_id.is_some();
                    any_without_turn_id |= parsed.turn_id.is_none();
                }
                Err(e) => failures.push(format!("protocol.md:{} (event {t}): {e}", example.line)),
            }
        }
    }
    if !any_turn_id || !any_without_turn_id {
        failures.push("the event examples should show `turnId` both present and absent".into());
    }
    check(failures);
}

#[test]
fn error_examples_have_a_valid_kind_and_its_code() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    let mut count = 0;
    for example in doc.examples(&mut failures) {
        if example.kind == Kind::Error {
            count += 1;
            if let Err(e) = check_error_response(&example.value) {
                failures.push(format!("protocol.md:{} (error): {e}", example.line));
            }
        }
    }
    if count == 0 {
        failures.push("protocol.md has no ```json error``` example".into());
    }
    check(failures);
}

#[test]
fn every_error_kind_and_code_is_documented() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    for kind in all_error_kinds() {
        let name = serde_json::to_value(kind).unwrap();
        let name = name.as_str().unwrap().to_owned();
        if !doc.text.contains(&format!("`{name}`")) {
            failures.push(format!(
                "ErrorKind `{name}` is not mentioned in protocol.md"
            ));
        }
        let code = kind.code().to_string();
        if !doc.text.contains(&code) {
            failures.push(format!(
                "code {code} (of `{name}`) is not mentioned in protocol.md"
            ));
        }
    }
    // Each method section's **Errors:** line names only real kinds.
    for (m, line) in &doc.errors_lines {
        for word in line.split('`').skip(1).step_by(2) {
            let known = all_error_kinds()
                .into_iter()
                .any(|k| serde_json::to_value(k).unwrap() == json!(word));
            if !known {
                failures.push(format!(
                    "method `{m}`: **Errors:** lists `{word}`, which is not an ErrorKind"
                ));
            }
        }
    }
    check(failures);
}

#[test]
fn every_wire_enum_value_is_documented() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    for (name, value) in all_enum_values() {
        let text = value.as_str().expect("wire enums are strings");
        if !doc.text.contains(&format!("`{text}`")) {
            failures.push(format!(
                "{name} value `{text}` is not mentioned in protocol.md"
            ));
        }
    }
    check(failures);
}

#[test]
fn examples_show_every_field_of_every_type() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    let examples = doc.examples(&mut failures);

    for event in full_events() {
        let t = event.type_name();
        let full = serde_json::to_value(&event).unwrap();
        let shown: Vec<&Value> = examples
            .iter()
            .filter(|e| e.kind == Kind::Event(t.to_owned()))
            .filter_map(|e| e.value.get("params"))
            .collect();
        for path in missing_paths(&[full], &shown) {
            failures.push(format!("event `{t}`: no example shows the field `{path}`"));
        }
    }
    for m in method::ALL {
        let params: Vec<&Value> = examples
            .iter()
            .filter(|e| e.kind == Kind::Request((*m).to_owned()))
            .filter_map(|e| e.value.get("params"))
            .collect();
        for path in missing_paths(&full_params(m), &params) {
            failures.push(format!(
                "method `{m}`: no request example shows the param `{path}`"
            ));
        }
        let results: Vec<&Value> = examples
            .iter()
            .filter(|e| e.kind == Kind::Response((*m).to_owned()))
            .filter_map(|e| e.value.get("result"))
            .collect();
        for path in missing_paths(&full_results(m), &results) {
            failures.push(format!(
                "method `{m}`: no response example shows the result field `{path}`"
            ));
        }
    }
    check(failures);
}

#[test]
fn numbers_in_the_text_match_the_code() {
    let doc = Doc::load();
    let mut failures = Vec::new();
    let cap = tandem::server::framing::MAX_FRAME_BYTES;
    if !doc.text.contains(&cap.to_string()) {
        failures.push(format!(
            "the frame cap {cap} bytes is not stated in protocol.md"
        ));
    }
    if cap.is_multiple_of(1024 * 1024)
        && !doc.text.contains(&format!("{} MiB", cap / (1024 * 1024)))
    {
        failures.push(format!(
            "the frame cap is {} MiB; protocol.md does not say so",
            cap / (1024 * 1024)
        ));
    }
    for code in [
        code::PARSE_ERROR,
        code::INVALID_REQUEST,
        code::METHOD_NOT_FOUND,
        code::INVALID_PARAMS,
        code::INTERNAL_ERROR,
        code::APPLICATION_ERROR,
    ] {
        if !doc.text.contains(&format!("| {code} |")) {
            failures.push(format!("code {code} has no row in the error code table"));
        }
    }
    if !doc.text.contains(&format!(
        "# tandem native protocol, version {PROTOCOL_VERSION}"
    )) {
        failures.push(format!(
            "the title should name protocol version {PROTOCOL_VERSION}"
        ));
    }
    check(failures);
}

/// The checks above must be able to fail: feed them broken examples and expect complaints.
#[test]
fn the_checks_catch_drift() {
    // A field the code does not have.
    let extra = json!({"jsonrpc":"2.0","method":"session/event","params":{"sessionId":"s","seq":1,"turnId":"t","type":"turnStarted","model":"m","colour":"red"}});
    assert!(check_event("turnStarted", &extra).is_err());
    // A required field missing.
    let missing = json!({"jsonrpc":"2.0","method":"session/event","params":{"sessionId":"s","seq":1,"type":"usage","model":"m","inputTokens":1}});
    assert!(check_event("usage", &missing).is_err());
    // The wrong type name.
    let wrong = json!({"jsonrpc":"2.0","method":"session/event","params":{"sessionId":"s","seq":1,"type":"assistantDelta","text":"x"}});
    assert!(check_event("reasoningDelta", &wrong).is_err());
    // An error with a code that does not match its kind, and one with an unknown kind.
    let bad_code = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"m","data":{"kind":"turnInProgress"}}});
    assert!(check_error_response(&bad_code).is_err());
    let bad_kind = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m","data":{"kind":"busy"}}});
    assert!(check_error_response(&bad_kind).is_err());
    // Params with a misspelt or unknown field, and a result of the wrong shape.
    let params = json!({"jsonrpc":"2.0","id":1,"method":"approve","params":{"sessionId":"s","requestId":"r","decision":"allow"}});
    assert!(check_request("approve", &params).is_err());
    let params = json!({"jsonrpc":"2.0","id":1,"method":"steer","params":{"sessionId":"s","text":"t","urgent":true}});
    assert!(check_request("steer", &params).is_err());
    assert!(check_result("stop", &json!({"stopped":"yes"})).is_err());
    // A session summary with `title: null` (the server omits an absent title).
    let listed =
        json!({"sessions":[{"sessionId":"s","cwd":"/","title":null,"model":"m","updatedAt":1}]});
    assert!(check_result("session/list", &listed).is_err());
    // Load results whose messages or pending entries the server would not build.
    let load = |messages: Value, pending: Value| {
        json!({"sessionId":"s","cwd":"/","model":"m","mode":"ask","state":"running",
               "networkAccess":false,"messages":messages,"pending":pending})
    };
    let user = json!({"id":"m_1","role":"user","ts":1,"turnId":"t","text":"hi","source":"user"});
    assert!(check_result("session/load", &load(json!([user.clone()]), json!([]))).is_ok());
    let mut extra = user.clone();
    extra["colour"] = json!("red");
    assert!(check_result("session/load", &load(json!([extra]), json!([]))).is_err());
    let mut missing = user.clone();
    missing.as_object_mut().unwrap().remove("source");
    assert!(check_result("session/load", &load(json!([missing]), json!([]))).is_err());
    let tool = json!({"id":"m_2","role":"tool","ts":1,"turnId":"t","text":"ok"});
    assert!(check_result("session/load", &load(json!([tool]), json!([]))).is_err());
    let running = json!({"id":"m_3","role":"assistant","ts":1,"turnId":"t","text":"","toolCalls":[
        {"toolCallId":"c","name":"read_file","arguments":{},"status":"running","result":"r"}]});
    assert!(check_result("session/load", &load(json!([running]), json!([]))).is_err());
    let delta = json!([{"type":"assistantDelta","text":"x"}]);
    assert!(check_result("session/load", &load(json!([]), delta)).is_err());
    assert!(check_result("session/load", &json!({"sessionId":"s"})).is_err());
    // A field nobody shows.
    let full = full_params(method::APPROVE);
    let shown = json!({"sessionId":"s","requestId":"r","decision":"once"});
    assert_eq!(
        missing_paths(&full, &[&shown]),
        vec![
            "argumentsDigest".to_owned(),
            "editedContent".to_owned(),
            "message".to_owned()
        ]
    );
    // A section without examples, an unlabelled block and a stray example.
    let doc = Doc::parse(
        "## Method `stop`\n\n```json\n{}\n```\n\n## Event `notice`\n\n```json event usage\n{}\n```\n".into(),
    );
    let mut failures = Vec::new();
    let examples = doc.examples(&mut failures);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(examples
        .iter()
        .all(|e| e.kind != Kind::Request("stop".into())));
}

/// Every `approvalRequested` the document shows (as an event or in `session/load`'s `pending`) carries
/// the digest a client computes by the documented rule, so a client written from protocol.md agrees
/// with the server. The examples' `arguments` are written with keys in the model's order, not sorted.
#[test]
fn approval_examples_carry_the_documented_arguments_digest() {
    fn collect<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
        match value {
            Value::Object(map) => {
                if map.get("type").and_then(Value::as_str) == Some("approvalRequested") {
                    out.push(value);
                }
                map.values().for_each(|v| collect(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let doc = Doc::load();
    let mut failures = Vec::new();
    let examples = doc.examples(&mut failures);
    let mut checked = 0;
    for example in &examples {
        let mut approvals = Vec::new();
        collect(&example.value, &mut approvals);
        for approval in approvals {
            let name = approval["name"].as_str().unwrap_or_default();
            let shown = approval["argumentsDigest"].as_str().unwrap_or_default();
            let expected = documented_digest(name, &approval["arguments"]);
            checked += 1;
            if shown != expected {
                failures.push(format!(
                    "protocol.md:{}: argumentsDigest {shown:?} for {name} is not the documented digest {expected:?}",
                    example.line
                ));
            }
            if expected != arguments_digest(name, &approval["arguments"]) {
                failures.push(format!(
                    "protocol.md:{}: the server's digest differs from the documented rule",
                    example.line
                ));
            }
        }
    }
    assert!(
        checked >= 3,
        "expected the document to show approvals, found {checked}"
    );
    check(failures);
}

/// The digest exactly as protocol.md's `approvalRequested` section describes it, written independently of
/// the server's code: FNV-1a 64 over the name, a NUL and the JSON with every object's keys sorted.
fn documented_digest(name: &str, arguments: &Value) -> String {
    fn text(value: &Value) -> String {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, &Value> = map.iter().collect();
                let fields: Vec<String> = ordered
                    .into_iter()
                    .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), text(v)))
                    .collect();
                format!("{{{}}}", fields.join(","))
            }
            Value::Array(items) => {
                let inner: Vec<String> = items.iter().map(text).collect();
                format!("[{}]", inner.join(","))
            }
            other => other.to_string(),
        }
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes().chain([0]).chain(text(arguments).bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}
