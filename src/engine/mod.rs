//! The engine: the turn loop and everything it needs that is not a transport.
//!
//! The engine never sees JSON-RPC ids or transport types. It reads and appends the session's
//! canonical history, asks providers for completions through the outbound projection, asks the
//! user through pending requests, runs tools, and announces what happened as [`Event`]s.
//!
//! [`Event`]: crate::protocol::Event

pub mod checkpoint;
pub mod compaction;
pub mod conversation;
pub mod display;
pub mod emitter;
pub mod history;
pub mod hooks;
pub mod memory;
pub mod outbound;
pub mod pending;
pub mod turn;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::config::Config;
use crate::providers::ProviderRegistry;
use crate::workspace::protected::OwnFiles;

/// What every session of one server shares: configuration, providers, and client abilities.
pub struct EngineContext {
    pub config: Arc<Config>,
    pub providers: ProviderRegistry,
    /// tandem's own files, which every workspace of this engine protects (see
    /// [`crate::workspace::protected::OwnFiles`]).
    pub own_files: OwnFiles,
    /// Whether a client is connected that can answer approvals and questions. When false, every
    /// approval resolves to deny (default deny) and questions get an error result.
    client_can_answer: AtomicBool,
}

impl EngineContext {
    pub fn new(config: Config, own_files: OwnFiles) -> Arc<Self> {
        let providers = ProviderRegistry::from_config(&config);
        Arc::new(EngineContext {
            config: Arc::new(config),
            providers,
            own_files,
            client_can_answer: AtomicBool::new(true),
        })
    }

    pub fn client_can_answer(&self) -> bool {
        self.client_can_answer.load(Ordering::SeqCst)
    }

    pub fn set_client_can_answer(&self, value: bool) {
        self.client_can_answer.store(value, Ordering::SeqCst);
    }
}
