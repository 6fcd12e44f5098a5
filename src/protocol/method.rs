//! Method names, exactly as they appear on the wire.

pub const INITIALIZE: &str = "initialize";
pub const MODELS_LIST: &str = "models/list";
pub const SESSION_NEW: &str = "session/new";
pub const SESSION_LIST: &str = "session/list";
pub const SESSION_LOAD: &str = "session/load";
pub const SESSION_ATTACH: &str = "session/attach";
pub const PROMPT: &str = "prompt";
pub const STOP: &str = "stop";
pub const STEER: &str = "steer";
pub const APPROVE: &str = "approve";
pub const ANSWER: &str = "answer";
pub const SWITCH_MODEL: &str = "switchModel";
pub const SET_MODE: &str = "setMode";
pub const SET_NETWORK_ACCESS: &str = "setNetworkAccess";
pub const RETRY: &str = "retry";
pub const MCP_STATUS: &str = "mcp/status";
pub const MCP_TRUST: &str = "mcp/trust";
pub const TURN_DIFF: &str = "turn/diff";
pub const SESSION_CHECKPOINTS: &str = "session/checkpoints";
pub const SESSION_REWIND: &str = "session/rewind";
pub const SESSION_FORK: &str = "session/fork";
pub const SESSION_DELETE: &str = "session/delete";
pub const COMMANDS_LIST: &str = "commands/list";
pub const HOOKS_LIST: &str = "hooks/list";
pub const HOOKS_TRUST: &str = "hooks/trust";
pub const SHUTDOWN: &str = "shutdown";
/// The one server-to-client notification.
pub const SESSION_EVENT: &str = "session/event";

/// Every client-to-server method this build answers.
pub const ALL: &[&str] = &[
    INITIALIZE,
    MODELS_LIST,
    SESSION_NEW,
    SESSION_LIST,
    SESSION_LOAD,
    SESSION_ATTACH,
    PROMPT,
    STOP,
    STEER,
    APPROVE,
    ANSWER,
    SWITCH_MODEL,
    SET_MODE,
    SET_NETWORK_ACCESS,
    RETRY,
    MCP_STATUS,
    MCP_TRUST,
    TURN_DIFF,
    SESSION_CHECKPOINTS,
    SESSION_REWIND,
    SESSION_FORK,
    SESSION_DELETE,
    COMMANDS_LIST,
    HOOKS_LIST,
    HOOKS_TRUST,
    SHUTDOWN,
];
