//! Restoring a session from the store alone (invariant 8): its history (parsed lazily), model,
//! mode, rules and next `seq`, and what its crashed turn must do first.
//!
//! Invariants: a write or shell call whose start was recorded and whose result was not gets an
//! `interrupted` result and is never re-run; the other open calls are re-authorized in order,
//! a decision recorded before the crash is used, an open request is asked again with its id.

use super::*;

/// A restored session, before its crashed turn continues.
pub struct Restored {
    pub handle: SessionHandle,
    /// Send as `Op::Resume` once the client has the load response.
    pub resume: Option<Resume>,
    /// Requests that were open at the crash; the resumed turn asks them again with the same ids.
    pub pending: Vec<serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("session {0} is not in the store; list sessions with session/list")]
    NotFound(String),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    #[error("session {id} cannot be restored: its workspace {cwd} cannot be opened ({why}); restore the folder or start a new session")]
    Workspace {
        id: String,
        cwd: String,
        why: String,
    },
    #[error("session {id} has a damaged message at position {position}: {why}")]
    Corrupt {
        id: String,
        position: usize,
        why: String,
    },
}

/// Rebuild a session from the store alone (invariant 8) and start its actor.
///
/// Unanswered trailing tool calls are handled like this: a write or shell call that had
/// started has no trustworthy outcome, so it gets an `interrupted` result and is never re-run;
/// the rest go back through authorization in order (an approval answered before the crash is
/// not asked again) and then the turn continues.
pub async fn restore(
    engine: Arc<EngineContext>,
    sink: Arc<dyn EventSink>,
    store: Store,
    session_id: &str,
) -> Result<Restored, RestoreError> {
    restore_with_client_fs(engine, sink, store, session_id, None, &[]).await
}

/// [`restore`] for a face whose client reads and writes files itself.
pub async fn restore_with_client_fs(
    engine: Arc<EngineContext>,
    sink: Arc<dyn EventSink>,
    store: Store,
    session_id: &str,
    client_fs: Option<Arc<dyn ClientFs>>,
    mcp_servers: &[serde_json::Value],
) -> Result<Restored, RestoreError> {
    let loaded = store
        .load_session(session_id)
        .await?
        .ok_or_else(|| RestoreError::NotFound(session_id.to_owned()))?;
    let mut loaded = loaded;
    let record = loaded.record.clone();
    // The messages with a stored display entry come first: every turn among them has ended,
    // so they hold no open call and nothing below needs them parsed. They stay JSON until an
    // op needs the history, and the load reply sends their entries as they are. The rest (the
    // crashed turn, or all of a history stored before entries existed) is parsed now.
    let mut rows = std::mem::take(&mut loaded.messages);
    let mut displays = std::mem::take(&mut loaded.displays);
    // An entry that is not a JSON object (a damaged row) ends the stretch: from there on the
    // rows are parsed and their entries computed, so the reply stays well-formed.
    let settled = displays
        .iter()
        .position(|d| !d.as_deref().is_some_and(display::usable_entry))
        .unwrap_or(displays.len());
    displays.truncate(settled);
    let stored_displays: Vec<String> = displays.into_iter().flatten().collect();
    let tail_rows = rows.split_off(settled);
    let (history, tail_displays) = tokio::task::spawn_blocking(move || {
        let history = parse_history(&tail_rows, settled)?;
        // Entries for the parsed messages whose turn is over, so the next resume skips them.
        let displays = display::settled_displays(settled as u64, &history);
        Ok((history, displays))
    })
    .await
    .map_err(|e| RestoreError::Corrupt {
        id: record.id.clone(),
        position: settled,
        why: format!("parsing the history crashed: {e}"),
    })?
    .map_err(|(position, why)| RestoreError::Corrupt {
        id: record.id.clone(),
        position,
        why,
    })?;
    let displays_stored = settled + tail_displays.len();
    store.set_displays(&record.id, tail_displays);
    let cwd = record.cwd.clone();
    let own_files = engine.own_files.clone();
    let workspace = tokio::task::spawn_blocking(move || {
        Workspace::open_protecting(vec![cwd.clone().into()], own_files)
    })
    .await
    .map_err(|e| RestoreError::Workspace {
        id: record.id.clone(),
        cwd: record.cwd.clone(),
        why: e.to_string(),
    })?
    .map_err(|e| RestoreError::Workspace {
        id: record.id.clone(),
        cwd: record.cwd.clone(),
        why: e.to_string(),
    })?;
    let mut rules = PermissionRules::default();
    for rule in &loaded.rules {
        match rule.kind.parse() {
            Ok(kind) => {
                rules.add(kind, rule.value.clone());
            }
            // A newer tandem's rule: skipping it can only ask more, never allow more, except a
            // deny rule of a kind unknown here, which is why unknown kinds are logged loudly.
            Err(e) => tracing::warn!(session = %record.id, "{e}; the rule is ignored"),
        }
    }
    let model = if engine.config.model(&record.model).is_some() {
        record.model.clone()
    } else {
        engine.config.default_model.clone()
    };
    let mode = record.mode.parse().unwrap_or(Mode::Ask);

    // Find the calls the crashed turn left without results.
    let orphans = crate::engine::history::orphan_tool_calls(&history);
    let mut fixes: Vec<Message> = Vec::new();
    let mut resume = None;
    if !orphans.is_empty() {
        let calls: Vec<crate::engine::history::ToolCallRecord> = history
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .filter(|c| orphans.contains(&c.id))
            .cloned()
            .collect();
        let turn_id = history
            .iter()
            .rev()
            .find(|m| !m.tool_calls.is_empty())
            .and_then(|m| m.meta.turn_id.clone())
            .unwrap_or_else(|| new_id("t"));
        let mut remaining = Vec::new();
        for call in calls {
            if loaded.started_tools.contains(&call.id) {
                let message = Message::tool_result(
                    &call,
                    crate::engine::history::ResultStatus::Interrupted,
                    "interrupted: tandem stopped while this was running, so its outcome is unknown; it was not run again. Check its effects before repeating it.".to_owned(),
                    &turn_id,
                );
                fixes.push(message);
            } else {
                remaining.push(call);
            }
        }
        if !remaining.is_empty() {
            let recorded = loaded
                .pending
                .iter()
                .filter(|p| remaining.iter().any(|c| c.id == p.tool_call_id))
                .map(|p| (p.tool_call_id.clone(), p.clone()))
                .collect();
            resume = Some(Resume {
                turn_id,
                calls: remaining,
                recorded,
            });
        }
        if resume.is_none() && !fixes.is_empty() {
            fixes.push(Message::notice(
                NoticeKind::Interrupted,
                "tandem stopped while this turn was running a command or an edit; its outcome is unknown and it was not run again. Prompt again to continue".to_owned(),
                history.iter().rev().find_map(|m| m.meta.turn_id.as_deref()),
            ));
        }
    } else if history.last().is_some_and(|m| {
        // (An empty `history` here means the last message has a stored entry, so its turn
        // ended: nothing to say.)
        m.role == Role::User && matches!(m.meta.source, Source::User | Source::Steering)
    }) {
        // The turn died before the model answered; say so instead of silently re-asking.
        fixes.push(Message::notice(
            NoticeKind::Interrupted,
            "tandem stopped before this turn finished; prompt again to continue".to_owned(),
            history.last().and_then(|m| m.meta.turn_id.as_deref()),
        ));
    }
    let state = ConversationStart {
        history,
        unparsed: (!rows.is_empty()).then(|| {
            UnparsedHistory::new(
                rows,
                stored_displays,
                record.title.clone(),
                record.updated_at,
            )
        }),
        displays_stored,
        model,
        mode,
        rules,
        allow_network: record.allow_network,
        usage: loaded.usage.clone(),
        resumed_turn: resume.as_ref().map(|r| r.turn_id.clone()),
        // A plan that cannot be read is no plan: the next `update_plan` writes a good one.
        plan: loaded
            .plan
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default(),
    };
    let mcp_hub = mcp::build_hub(&engine, Some(&store), &workspace, mcp_servers).await;
    let handle = start_actor(
        engine,
        sink,
        record.id.clone(),
        workspace,
        Some(store),
        client_fs,
        mcp_hub,
        state,
        loaded.last_seq,
        None,
    );
    handle.shared.commit_restore_fixes(fixes);
    let pending: Vec<serde_json::Value> = resume
        .iter()
        .flat_map(|r| r.recorded.values())
        .filter(|p| p.decision.is_none())
        .filter_map(|p| serde_json::from_str(&p.payload).ok())
        .collect();
    Ok(Restored {
        handle,
        resume,
        pending,
    })
}
