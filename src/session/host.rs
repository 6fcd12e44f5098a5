//! The host between the faces and the sessions (after codex-rs's conversation manager): it owns
//! the engine context, the session store (opened in the background at start-up) and the live
//! sessions of its face, and shuts them all down.
//!
//! Every face (`serve`, `acp`, `lsp`) keeps one `Host` (`serve` one per process, shared by its
//! stdio connection and every WebSocket client), so
//! creating, finding, listing and shutting down sessions, and waiting for the store, are written
//! once. A face keeps its own data per session in `F` (the ACP face its bridge; the native face
//! nothing) and only translates.
//!
//! Invariants: the live map is locked only for short, non-awaiting sections; `shutdown` stops
//! every session it held and waits for each to finish its turn; the store is dropped off the
//! async workers (the drop waits for its writer to commit).
//! Does not: speak any wire protocol, or decide anything a session decides.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::engine::history::now_ms;
use crate::engine::EngineContext;
use crate::store::{Store, StoreError};

use super::{lock, Op, SessionHandle};

/// A session this connection holds, with the face's own data for it.
#[derive(Clone)]
pub struct Live<F> {
    pub handle: SessionHandle,
    /// The workspace folder as the session stores it.
    pub cwd: String,
    /// When this connection created or opened it (ms since the epoch): the listing date of a
    /// session nobody has written to yet.
    pub opened_at: u64,
    pub face: F,
}

/// One session as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub session_id: String,
    pub cwd: String,
    pub title: Option<String>,
    pub model: String,
    pub updated_at: u64,
}

/// Why the store cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreUnavailable {
    #[error("{0}")]
    Failed(String),
}

/// The store opens on the blocking pool while the face already answers `initialize`, so a cold
/// start does not wait for SQLite; the first use waits for it.
enum StoreSlot {
    None,
    Opening(tokio::task::JoinHandle<Result<Store, StoreError>>),
    Ready(Store),
    Failed(String),
}

pub struct Host<F> {
    engine: Arc<EngineContext>,
    store: tokio::sync::Mutex<StoreSlot>,
    live: Mutex<HashMap<String, Live<F>>>,
}

impl<F: Clone> Host<F> {
    /// A host whose store opens at `database` in the background (none: sessions live in memory
    /// only).
    pub fn new(engine: Arc<EngineContext>, database: Option<PathBuf>) -> Self {
        let slot = match database {
            Some(path) => {
                StoreSlot::Opening(tokio::task::spawn_blocking(move || Store::open(&path)))
            }
            None => StoreSlot::None,
        };
        Self::with_opening_store(engine, slot)
    }

    /// A host with a store already being opened by the caller (`None`: no store).
    pub fn with_store_task(
        engine: Arc<EngineContext>,
        opening: Option<tokio::task::JoinHandle<Result<Store, StoreError>>>,
    ) -> Self {
        let slot = match opening {
            Some(task) => StoreSlot::Opening(task),
            None => StoreSlot::None,
        };
        Self::with_opening_store(engine, slot)
    }

    fn with_opening_store(engine: Arc<EngineContext>, slot: StoreSlot) -> Self {
        Host {
            engine,
            store: tokio::sync::Mutex::new(slot),
            live: Mutex::new(HashMap::new()),
        }
    }

    pub fn engine(&self) -> &Arc<EngineContext> {
        &self.engine
    }

    /// Whether sessions are persisted (a store was configured, whether or not it opened).
    pub async fn has_store(&self) -> bool {
        !matches!(&*self.store.lock().await, StoreSlot::None)
    }

    /// The store, waiting for it to finish opening; `None` when the host keeps no store.
    pub async fn store(&self) -> Result<Option<Store>, StoreUnavailable> {
        let mut slot = self.store.lock().await;
        if let StoreSlot::Opening(task) = &mut *slot {
            *slot = match task.await {
                Ok(Ok(store)) => StoreSlot::Ready(store),
                Ok(Err(e)) => StoreSlot::Failed(e.to_string()),
                Err(e) => StoreSlot::Failed(format!("opening the session database crashed: {e}")),
            };
        }
        match &*slot {
            StoreSlot::None => Ok(None),
            StoreSlot::Ready(store) => Ok(Some(store.clone())),
            StoreSlot::Failed(why) => Err(StoreUnavailable::Failed(why.clone())),
            StoreSlot::Opening(_) => Err(StoreUnavailable::Failed(
                "the session database is still opening; try again".to_owned(),
            )),
        }
    }

    /// Hold a session created or opened by the face.
    pub fn insert(&self, handle: SessionHandle, cwd: String, face: F) {
        let live = Live {
            handle,
            cwd,
            opened_at: now_ms(),
            face,
        };
        lock(&self.live).insert(live.handle.id().to_owned(), live);
    }

    pub fn get(&self, session_id: &str) -> Option<Live<F>> {
        lock(&self.live).get(session_id).cloned()
    }

    /// Stop holding a session (`session/close`); the caller shuts it down.
    pub fn remove(&self, session_id: &str) -> Option<Live<F>> {
        lock(&self.live).remove(session_id)
    }

    /// Stop holding every session, for a face that shuts them down in its own order.
    pub fn drain(&self) -> Vec<Live<F>> {
        lock(&self.live).drain().map(|(_, l)| l).collect()
    }

    /// The sessions held here that have messages, newest first, optionally only those of `cwd`.
    pub fn list_live(&self, cwd: Option<&str>) -> Vec<Listing> {
        let mut listings: Vec<Listing> = lock(&self.live)
            .iter()
            .filter(|(_, live)| cwd.is_none_or(|c| c == live.cwd))
            .filter_map(|(id, live)| {
                let summary = live.handle.shared.summary()?;
                Some(Listing {
                    session_id: id.clone(),
                    cwd: live.cwd.clone(),
                    title: summary.title,
                    model: summary.model,
                    updated_at: summary.updated_at.unwrap_or(live.opened_at),
                })
            })
            .collect();
        listings.sort_by_key(|l| std::cmp::Reverse(l.updated_at));
        listings
    }

    /// The sessions of the store (every session ever stored, newest first), or those held here
    /// when the host keeps no store.
    pub async fn list(&self, cwd: Option<String>) -> Result<Vec<Listing>, StoreUnavailable> {
        match self.store().await? {
            Some(store) => Ok(store
                .list_sessions(cwd)
                .await
                .map_err(|e| StoreUnavailable::Failed(e.to_string()))?
                .into_iter()
                .map(|r| Listing {
                    session_id: r.id,
                    cwd: r.cwd,
                    title: r.title,
                    model: r.model,
                    updated_at: r.updated_at,
                })
                .collect()),
            None => Ok(self.list_live(cwd.as_deref())),
        }
    }

    /// Stop every session held here and wait until each has ended its turn (the turns end as
    /// interrupted: nobody is left to answer). Returns what the face kept for each, so it can
    /// let go of its own parts.
    pub async fn shutdown(&self) -> Vec<F> {
        let live = self.drain();
        let mut waits = Vec::with_capacity(live.len());
        for l in &live {
            waits.push(shutdown_reply(&l.handle));
        }
        for wait in waits {
            let _ = wait.await;
        }
        live.into_iter().map(|l| l.face).collect()
    }

    /// Let go of the store: dropping the last handle waits for its writer to commit what is
    /// queued, so it happens on the blocking pool.
    pub async fn close_store(&self) {
        let slot = std::mem::replace(&mut *self.store.lock().await, StoreSlot::None);
        let _ = tokio::task::spawn_blocking(move || drop(slot)).await;
    }
}

/// Send `Op::Shutdown` and return what resolves once the session has stopped.
pub fn shutdown_reply(handle: &SessionHandle) -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle.send(Op::Shutdown {
        reply: Box::new(move |_| {
            let _ = tx.send(());
        }),
    });
    rx
}
