//! Wire types of the native protocol (v1): method params and results, session events, error kinds.
//!
//! This is the only module whose types derive `Serialize`/`Deserialize` for the wire. The engine
//! uses its leaf enums (`Mode`, `Decision`, `ToolKind`) and `Event` as its output vocabulary, as
//! codex-rs's core uses its protocol crate, and the faces serialize or translate them; the
//! engine's own state (history, tools, rules) is plain Rust. So a change here is a change of
//! the contract: `protocol.md` documents every type below and `tests/it/protocol_doc.rs` parses its
//! examples back into these types, so the two cannot drift apart silently.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod checkpoint;
pub mod customization;
pub mod event;
pub mod fit;

pub use checkpoint::*;
pub use customization::*;
pub use event::*;

/// The protocol version this server speaks; `initialize` refuses any other.
pub const PROTOCOL_VERSION: u32 = 1;

/// Method names, exactly as they appear on the wire.
pub mod method;

/// JSON-RPC error codes used by the server.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Application errors; `data.kind` says which.
    pub const APPLICATION_ERROR: i64 = -32000;
}

/// The machine-readable `data.kind` of an error response. Clients branch on this, never on text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
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
    /// The session store could not save this session's last changes; the session answers
    /// this until the store writes again.
    StoreUnavailable,
    /// `steer` while the turn already holds `max_queued_steering` texts (or
    /// `max_queued_steering_bytes`) not yet applied.
    SteeringQueueFull,
    /// A `turnId` that is not a turn of the session's conversation (never one, or rewound).
    UnknownTurn,
}

impl ErrorKind {
    /// The JSON-RPC code that goes with this kind.
    pub fn code(self) -> i64 {
        match self {
            ErrorKind::ParseError => code::PARSE_ERROR,
            ErrorKind::InvalidRequest | ErrorKind::FrameTooLarge => code::INVALID_REQUEST,
            ErrorKind::MethodNotFound => code::METHOD_NOT_FOUND,
            ErrorKind::InvalidParams => code::INVALID_PARAMS,
            ErrorKind::Internal => code::INTERNAL_ERROR,
            _ => code::APPLICATION_ERROR,
        }
    }
}

/// The `data` member of every error object this server sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorData {
    pub kind: ErrorKind,
    /// With `invalidParams`: the path of the offending param (`cwd`, `content[0].mimeType`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcErrorObject {
    pub code: i64,
    pub message: String,
    pub data: ErrorData,
}

impl RpcErrorObject {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        RpcErrorObject {
            code: kind.code(),
            message: message.into(),
            data: ErrorData { kind, field: None },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// initialize

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub protocol_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_info: Option<ClientInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<ClientCapabilities>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// `false` says this client cannot answer approvals, so every approval resolves to deny.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: u32,
    pub server_info: ServerInfo,
    pub capabilities: ServerCapabilities,
    pub models: Vec<ModelInfo>,
    pub default_model: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCapabilities {
    /// Whether `session/list` and `session/load` are backed by a durable store.
    pub session_store: bool,
    /// The framing the server detected on this connection and answers in.
    pub framing: Framing,
    /// Whether `prompt` accepts `{type:"image"}` parts.
    pub image_prompts: bool,
    /// Whether `prompt` accepts `{type:"document"}` parts (PDF).
    #[serde(default)]
    pub document_prompts: bool,
    /// Where other clients attach to this server's sessions; present only when it listens
    /// (`tandem serve --listen ws://…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachInfo>,
}

/// How a second client reaches a listening server (`session/attach`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachInfo {
    /// `ws://127.0.0.1:PORT`, the address it listens on.
    pub url: String,
    /// The file (mode 0600) whose contents a client sends as `Authorization: Bearer …`.
    pub token_file: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Framing {
    Ndjson,
    ContentLength,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// The id clients use (`session/new.model`, `switchModel.model`).
    pub id: String,
    /// The configured provider entry this model is served by.
    pub provider: String,
    /// The model name sent to the provider.
    pub name: String,
    pub context_window: u64,
    /// The most tokens one answer may have, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Whether the model sees images; without it images are replaced by a placeholder.
    pub vision: bool,
    /// Whether the model reads PDF documents; without it they are replaced by a placeholder.
    #[serde(default)]
    pub pdf: bool,
    /// Whether the model thinks before answering (`reasoningDelta` events).
    #[serde(default)]
    pub reasoning: bool,
    /// Whether the model may call several tools in one answer.
    #[serde(default)]
    pub parallel_tool_calls: bool,
}

/// The result of `models/list`: the model catalog, as in `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelsListResult {
    pub models: Vec<ModelInfo>,
    pub default_model: String,
}

/// Token usage of one session with one model, summed over every request that model answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageTotal {
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
}

// ---------------------------------------------------------------------------------------------
// sessions

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    Ask,
    AutoEdit,
    Plan,
    FullAuto,
}

impl Mode {
    /// Every mode, in the order pickers list them.
    pub const ALL: [Mode; 4] = [Mode::Ask, Mode::AutoEdit, Mode::Plan, Mode::FullAuto];

    /// The wire name (`ask`, `autoEdit`, `plan`, `fullAuto`): what the protocols send and the
    /// store keeps. The one table of mode names; `FromStr` reads the same names back.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::AutoEdit => "autoEdit",
            Mode::Plan => "plan",
            Mode::FullAuto => "fullAuto",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is none of [`Mode::ALL`]'s wire names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode `{0}`; use ask, autoEdit, plan or fullAuto")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(text: &str) -> Result<Mode, UnknownMode> {
        Mode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == text)
            .ok_or_else(|| UnknownMode(text.to_owned()))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNewParams {
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// MCP servers for this session, in ACP's `McpServer` shape (stdio `{name, command, args,
    /// env: [{name, value}]}` or `{type: "http", name, url, headers: [{name, value}]}`); they
    /// join the config's servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNewResult {
    pub session_id: String,
    pub model: String,
    pub mode: Mode,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListParams {
    /// Only sessions whose workspace is this absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    pub cwd: String,
    /// The first prompt, shortened; absent until the first prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub model: String,
    /// Milliseconds since the Unix epoch.
    pub updated_at: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionListResult {
    pub sessions: Vec<SessionSummary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ConversationState {
    Idle,
    Running,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionLoadResult {
    pub session_id: String,
    pub cwd: String,
    pub model: String,
    pub mode: Mode,
    pub state: ConversationState,
    /// Whether the user allowed the session's sandboxed commands to use the network.
    pub network_access: bool,
    /// The display history: user, assistant (with reasoning and tool calls carrying their
    /// status, result and diff) and notice messages, in order.
    pub messages: Vec<DisplayMessage>,
    /// The `approvalRequested`/`questionAsked` events still waiting for an answer.
    pub pending: Vec<Value>,
    /// Token usage per model over the session's life, in the order the models were first used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<UsageTotal>,
    /// The model's current plan (`update_plan`), when it has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlanEntry>,
    /// Present when older messages were left out to keep the reply under the frame cap:
    /// `session/load` with this `cursor` returns the page before `messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// One entry of `session/load`'s `messages`: a history message as a client shows it.
///
/// One flat struct rather than an enum tagged by `role`, so that members serialize in
/// alphabetical order (as protocol.md promises) and a resume of a long session serializes
/// straight from typed fields instead of building a `serde_json::Value` tree per message.
/// Which optional members a role has is in protocol.md; `session::display::display_history` builds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisplayMessage {
    /// User prompts with documents (PDFs) only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<Vec<DisplayDocument>>,
    pub id: String,
    /// User prompts with images only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<DisplayImage>>,
    /// Notices only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<NoticeKind>,
    /// Assistant messages with reasoning only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    pub role: DisplayRole,
    /// User messages only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<DisplaySource>,
    pub text: String,
    /// Always present (possibly empty) on assistant messages, absent on the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<DisplayToolCall>>,
    pub ts: u64,
    /// `null` for a model switch made while idle.
    pub turn_id: Option<String>,
    /// Assistant messages whose provider reported usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<DisplayUsage>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DisplayRole {
    User,
    Assistant,
    Notice,
}

/// Who typed a user message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DisplaySource {
    User,
    Steering,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisplayDocument {
    pub data: String,
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisplayImage {
    pub data: String,
    pub mime_type: String,
}

/// A tool call with its result folded in, once it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisplayToolCall {
    /// The JSON the model sent; a string holding the raw text when it was not valid JSON.
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<Value>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolStatus>,
    pub tool_call_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisplayUsage {
    pub input_tokens: u64,
    pub model: String,
    pub output_tokens: u64,
}

/// Params of the methods that only name a session (`stop`, `retry`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionIdParams {
    pub session_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionLoadParams {
    pub session_id: String,
    /// A `cursor` from an earlier `session/load` result: return the messages before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `session/attach`: receive a live session's events, first those after `fromSeq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionAttachParams {
    pub session_id: String,
    /// The last `seq` the client has; the replay starts after it (default 0: everything the
    /// store kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// turns

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptParams {
    pub session_id: String,
    pub content: PromptContent,
}

/// A prompt is a plain string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PromptContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// By hand rather than `untagged`: an untagged enum reports every mistake as "did not match any
/// variant", while this visitor says what was expected and lets the error's path reach into the
/// list (`content[2]`), so a client learns which part is wrong.
impl<'de> Deserialize<'de> for PromptContent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> serde::de::Visitor<'de> for ContentVisitor {
            type Value = PromptContent;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<PromptContent, E> {
                Ok(PromptContent::Text(text.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<PromptContent, E> {
                Ok(PromptContent::Text(text))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<PromptContent, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(part) = seq.next_element::<ContentPart>()? {
                    parts.push(part);
                }
                Ok(PromptContent::Parts(parts))
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ContentPart {
    Text {
        text: String,
    },
    Image {
        mime_type: String,
        data: String,
    },
    /// A PDF (`mimeType: "application/pdf"`), base64 in `data`; `name` is its file name.
    Document {
        mime_type: String,
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    /// The turn that started; absent when a built-in slash command answered without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The slash command the prompt ran, if it was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<PromptCommand>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopResult {
    pub stopped: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SteerParams {
    pub session_id: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteerResult {
    pub queued: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Decision {
    Once,
    AlwaysTool,
    AlwaysCommand,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApproveParams {
    pub session_id: String,
    pub request_id: String,
    pub decision: Decision,
    /// With `deny`: a message the model sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For write_file/edit_file: the user's edited version, written instead of the proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_content: Option<String>,
    /// The `argumentsDigest` of the approvalRequested this answers; a mismatch is refused
    /// with `staleApproval`, so an approval can only ever apply to what the user saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_digest: Option<String>,
}

/// The digest of one tool call as `approvalRequested.argumentsDigest` shows it: FNV-1a (64 bit)
/// over the tool name, a NUL, and the arguments' canonical JSON ([`canonical_json`]), in hex.
///
/// The canonical form matters: serde_json keeps the model's key order here (a dependency turns on
/// `preserve_order`), and a client that computes the documented digest from the keys it received
/// must get the same value whatever order the model wrote them in.
pub fn arguments_digest(name: &str, arguments: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let canonical = canonical_json(arguments);
    for byte in name.bytes().chain([0u8]).chain(canonical.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// JSON text with the keys of every object sorted (by their UTF-8 bytes) and no whitespace;
/// strings, numbers and literals are written as serde_json writes them. Two values that differ
/// only in key order give the same text, so this is what digests and repeat detection compare.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical_json(value, &mut out);
    out
}

fn write_canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical_json(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical_json(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerParams {
    pub session_id: String,
    pub request_id: String,
    pub answer: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwitchModelParams {
    pub session_id: String,
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwitchModelResult {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeParams {
    pub session_id: String,
    pub mode: Mode,
}

/// Params of `setNetworkAccess`: the user's choice whether the session's sandboxed commands may
/// use the network. No tool can send this; only the client can.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetNetworkAccessParams {
    pub session_id: String,
    pub allow: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetNetworkAccessResult {
    pub allow: bool,
}

/// Where an MCP server's definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum McpServerSource {
    Config,
    Session,
    Workspace,
}

/// One MCP server of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInfo {
    pub name: String,
    pub source: McpServerSource,
    pub status: McpServerState,
    /// The model-facing names of its tools, while it is ready.
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpStatusResult {
    pub servers: Vec<McpServerInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpTrustParams {
    pub session_id: String,
    /// The name of a server of the workspace's `.mcp.json`.
    pub server: String,
}

/// The `{}` result of `approve`, `answer` and `setMode`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmptyResult {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_digest_does_not_depend_on_key_order() {
        // serde_json keeps insertion order in this build (`preserve_order`), so these two values
        // serialize differently with `to_string`; the digest must not see that difference.
        let model_order: Value = serde_json::from_str(
            r#"{"path":"a.md","content":"x","opts":{"z":1,"a":[{"y":2,"b":3}]}}"#,
        )
        .unwrap();
        let sorted_order: Value = serde_json::from_str(
            r#"{"content":"x","opts":{"a":[{"b":3,"y":2}],"z":1},"path":"a.md"}"#,
        )
        .unwrap();
        assert_ne!(model_order.to_string(), sorted_order.to_string());
        assert_eq!(
            canonical_json(&model_order),
            r#"{"content":"x","opts":{"a":[{"b":3,"y":2}],"z":1},"path":"a.md"}"#
        );
        assert_eq!(
            arguments_digest("write_file", &model_order),
            arguments_digest("write_file", &sorted_order)
        );
        // The name is part of what is hashed.
        assert_ne!(
            arguments_digest("write_file", &model_order),
            arguments_digest("edit_file", &model_order)
        );
    }
}
