//! Why a session refuses an op: the typed errors the faces map to their wire error kinds.

use crate::protocol::ErrorKind;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("a turn is already running in this session; wait for turnEnded, `steer` it, or `stop` it first")]
    TurnInProgress,
    #[error("no turn is running in this session; send `prompt` instead")]
    NoTurnRunning,
    #[error("{0}")]
    StaleApproval(String),
    #[error("unknown model `{model}`; pick one of: {known}")]
    UnknownModel { model: String, known: String },
    #[error("{0}")]
    RetryUnavailable(String),
    #[error("the session has shut down; start a new session")]
    Closed,
    /// A stored message of a restored session cannot be parsed, so its history cannot be sent
    /// to a model.
    #[error("{0}")]
    HistoryDamaged(String),
    /// The store could not save this session's last changes and still cannot (see
    /// [`Conversation::ensure_stored`]).
    #[error("the session store cannot write ({0}), so this session takes no new work: nothing more could be saved; free disk space or end the program that holds the database lock, then send the request again")]
    StoreUnavailable(String),
    /// The running turn already holds as much queued steering as the config allows.
    #[error("{0}")]
    SteeringQueueFull(String),
    /// `editedContent` for a proposal that was shown cut.
    #[error("{0}")]
    EditUnavailable(String),
    /// A prompt that says nothing, or carries a part no model takes
    /// ([`super::history::prompt_problem`]).
    #[error("{0}")]
    InvalidPrompt(String),
    /// A turn id that is not a turn of the conversation (never one, or rewound).
    #[error("`{0}` is not a turn of this session's conversation (never one, or rewound already); session/checkpoints lists its turns")]
    UnknownTurn(String),
    /// Something this session cannot do at all (checkpoints of a session without a store).
    #[error("{0}")]
    Unsupported(String),
    /// A mode name no mode has (`/mode NAME`).
    #[error("unknown mode `{0}`; use ask, autoEdit, plan or fullAuto")]
    InvalidMode(String),
}

impl SessionError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            SessionError::TurnInProgress => ErrorKind::TurnInProgress,
            SessionError::NoTurnRunning => ErrorKind::NoTurnRunning,
            SessionError::StaleApproval(_) => ErrorKind::StaleApproval,
            SessionError::UnknownModel { .. } => ErrorKind::UnknownModel,
            SessionError::RetryUnavailable(_) => ErrorKind::RetryUnavailable,
            SessionError::Closed => ErrorKind::UnknownSession,
            SessionError::HistoryDamaged(_) => ErrorKind::Internal,
            SessionError::StoreUnavailable(_) => ErrorKind::StoreUnavailable,
            SessionError::SteeringQueueFull(_) => ErrorKind::SteeringQueueFull,
            SessionError::EditUnavailable(_) | SessionError::InvalidPrompt(_) => {
                ErrorKind::InvalidParams
            }
            SessionError::UnknownTurn(_) => ErrorKind::UnknownTurn,
            SessionError::Unsupported(_) => ErrorKind::Unsupported,
            SessionError::InvalidMode(_) => ErrorKind::InvalidMode,
        }
    }
}
