//! The ACP face's session lifecycle: `session/new`, `session/load` and `session/resume` (with
//! the history replay of a load), `session/list` with its pages, and `session/close`.
//!
//! Invariants: a session is held by the host only once its bridge has its handle; a load with
//! another `cwd` than the session's is refused; a load replays the whole history before its
//! reply, and a crashed turn resumes only after it.

use super::*;

impl Acp {
    pub(super) fn new_bridge(&self, root: PathBuf, cx: ConnectionTo<Client>) -> Arc<Bridge> {
        let abilities = *lock(&self.abilities);
        Bridge::new(root, cx, self.engine.clone(), abilities)
    }

    pub(super) async fn new_session(
        &self,
        request: acp::NewSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<Value, AcpError> {
        let mut roots = vec![request.cwd.clone()];
        roots.extend(request.additional_directories.iter().cloned());
        for root in &roots {
            check_dir(root)?;
        }
        let own_files = self.engine.own_files.clone();
        let workspace =
            tokio::task::spawn_blocking(move || Workspace::open_protecting(roots, own_files))
                .await
                .map_err(AcpError::into_internal_error)?
                .map_err(|e| error(ErrorKind::InvalidCwd, e.to_string(), Value::Null))?;
        let store = self.store().await?;
        let model = self.engine.config.default_model.clone();
        let mode = crate::protocol::Mode::Ask;
        let bridge = self.new_bridge(workspace.roots()[0].clone(), cx);
        let servers = mcp_values(&request.mcp_servers);
        let mcp = session::mcp::build_hub(&self.engine, Some(&store), &workspace, &servers).await;
        let handle = session::spawn(
            self.engine.clone(),
            Arc::new(BridgeSink(bridge.clone())),
            NewSession {
                workspace,
                model: model.clone(),
                mode,
                store: Some(store),
                client_fs: bridge.client_fs(),
                mcp,
            },
        );
        let session_id = handle.id().to_owned();
        bridge.set_handle(handle.clone());
        // The servers start after the response, as a crashed turn's resume does below.
        let servers = handle.clone();
        let announcing = bridge.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            servers.start_mcp_servers();
            super::customization::announce_commands(announcing, servers);
        });
        let cwd = workspace_root(&handle);
        self.host.insert(handle, cwd, bridge.clone());
        let response = acp::NewSessionResponse::new(session_id)
            .config_options(convert::config_options(
                &self.engine.config,
                &model,
                mode,
                false,
            ))
            .modes(convert::mode_state(mode));
        to_value(response)
    }

    /// `session/load` (replay the history first) and `session/resume` (no replay).
    pub(super) async fn open_session(
        &self,
        session_id: String,
        cwd: PathBuf,
        replay: bool,
        mcp_servers: Vec<acp::McpServer>,
        cx: ConnectionTo<Client>,
    ) -> Result<Value, AcpError> {
        if let Ok((bridge, handle)) = self.live(&session_id) {
            if !same_dir(&bridge.root, &cwd) {
                return Err(error(
                    ErrorKind::InvalidCwd,
                    format!(
                        "session {session_id} belongs to `{}`, not `{}`; open it with that cwd, or start a new session in this folder",
                        bridge.root.display(),
                        cwd.display()
                    ),
                    json!({"sessionId": session_id}),
                ));
            }
            if replay {
                replay_history(&bridge, &handle).await?;
            }
            return self.opened(&handle, replay);
        }
        let store = self.store().await?;
        let loaded = store
            .load_session(&session_id)
            .await
            .map_err(|e| error(ErrorKind::Internal, e.to_string(), Value::Null))?
            .ok_or_else(|| {
                error(
                    ErrorKind::UnknownSession,
                    format!(
                        "session {session_id} is not in the store; list sessions with session/list"
                    ),
                    json!({"sessionId": session_id}),
                )
            })?;
        // A session works in the folder it was created for; opening it for another one would
        // let the model read and write a tree the user did not pick for this session.
        if !same_dir(Path::new(&loaded.record.cwd), &cwd) {
            return Err(error(
                ErrorKind::InvalidCwd,
                format!(
                    "session {session_id} belongs to `{}`, not `{}`; open it with that cwd, or start a new session in this folder",
                    loaded.record.cwd,
                    cwd.display()
                ),
                json!({"sessionId": session_id, "sessionCwd": loaded.record.cwd}),
            ));
        }
        let bridge = self.new_bridge(PathBuf::from(&loaded.record.cwd), cx);
        let restored = session::restore_with_client_fs(
            self.engine.clone(),
            Arc::new(BridgeSink(bridge.clone())),
            store,
            &session_id,
            bridge.client_fs(),
            &mcp_values(&mcp_servers),
        )
        .await
        .map_err(|e| {
            let kind = match e {
                session::RestoreError::NotFound(_) => ErrorKind::UnknownSession,
                session::RestoreError::Workspace { .. } => ErrorKind::InvalidCwd,
                _ => ErrorKind::Internal,
            };
            error(kind, e.to_string(), Value::Null)
        })?;
        let handle = restored.handle.clone();
        bridge.set_handle(handle.clone());
        if replay {
            replay_history(&bridge, &handle).await?;
        }
        let answer = self.opened(&handle, replay);
        self.host
            .insert(handle.clone(), workspace_root(&handle), bridge.clone());
        // The servers start, and a turn that crashed continues, after the response (its open
        // requests are asked again).
        let send = handle.clone();
        let resume = restored.resume;
        let announcing = bridge.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            send.start_mcp_servers();
            super::customization::announce_commands(announcing, send.clone());
            if let Some(resume) = resume {
                send.send(Op::Resume { resume });
            }
        });
        answer
    }

    pub(super) fn opened(&self, handle: &SessionHandle, load: bool) -> Result<Value, AcpError> {
        let settings = handle.shared.settings();
        let (model, mode) = (settings.model, settings.mode);
        let options =
            convert::config_options(&self.engine.config, &model, mode, settings.allow_network);
        if load {
            to_value(
                acp::LoadSessionResponse::new()
                    .config_options(options)
                    .modes(convert::mode_state(mode)),
            )
        } else {
            to_value(
                acp::ResumeSessionResponse::new()
                    .config_options(options)
                    .modes(convert::mode_state(mode)),
            )
        }
    }

    /// `session/list`, [`LIST_PAGE`] sessions a page, newest first; the cursor is the
    /// position of the next page's first session.
    pub(super) async fn list(&self, request: acp::ListSessionsRequest) -> Result<Value, AcpError> {
        let start = match request.cursor.as_deref().map(str::parse::<usize>) {
            None => 0,
            Some(Ok(start)) => start,
            Some(Err(_)) => {
                return Err(invalid(format!(
                    "cursor {:?} was not returned by session/list; send a `nextCursor` from an earlier page, or none for the first",
                    request.cursor.unwrap_or_default()
                )))
            }
        };
        let cwd = request.cwd.map(|c| c.display().to_string());
        let all = self
            .host
            .list(cwd)
            .await
            .map_err(|e| error(ErrorKind::Internal, e.to_string(), Value::Null))?;
        if start > all.len() {
            return Err(invalid(format!(
                "cursor {start} is past the {} sessions there are; start again without a cursor",
                all.len()
            )));
        }
        let end = (start + LIST_PAGE).min(all.len());
        let next = (end < all.len()).then(|| end.to_string());
        let sessions = all
            .into_iter()
            .skip(start)
            .take(LIST_PAGE)
            .map(|l| {
                acp::SessionInfo::new(l.session_id, PathBuf::from(l.cwd))
                    .title(l.title)
                    .updated_at(convert::rfc3339(l.updated_at))
            })
            .collect();
        to_value(acp::ListSessionsResponse::new(sessions).next_cursor(next))
    }

    pub(super) async fn close(&self, session_id: &str) -> Result<Value, AcpError> {
        let live = self.host.remove(session_id);
        let Some(live) = live else {
            return Err(error(
                ErrorKind::UnknownSession,
                format!("unknown session {session_id}; nothing to close"),
                json!({"sessionId": session_id}),
            ));
        };
        live.face.cancel();
        let _ = shutdown_reply(&live.handle).await;
        live.face.detach();
        to_value(acp::CloseSessionResponse::new())
    }
}

pub(super) fn check_dir(path: &Path) -> Result<(), AcpError> {
    let bad = |why: &str| {
        error(
            ErrorKind::InvalidCwd,
            format!(
                "`{}` {why}; pass the absolute path of the workspace folder",
                path.display()
            ),
            Value::Null,
        )
    };
    if !path.is_absolute() {
        return Err(bad("is not an absolute path"));
    }
    if !path.is_dir() {
        return Err(bad("is not an existing directory"));
    }
    Ok(())
}

/// The session's workspace folder as the store keeps it.
pub(super) fn workspace_root(handle: &SessionHandle) -> String {
    handle.shared.workspace.roots()[0].display().to_string()
}

/// Whether two folder paths name the same directory (the stored cwd is canonical; the
/// client's may be spelled through a link).
pub(super) fn same_dir(stored: &Path, asked: &Path) -> bool {
    stored == asked
        || match (std::fs::canonicalize(stored), std::fs::canonicalize(asked)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
}

/// The client's MCP servers as the engine reads them (ACP's JSON shape, which the native
/// face's `mcpServers` shares); an SSE server stays in, to be refused with its reason.
pub(super) fn mcp_values(servers: &[acp::McpServer]) -> Vec<Value> {
    servers
        .iter()
        .filter_map(|server| serde_json::to_value(server).ok())
        .collect()
}

/// Send the session's history as `session/update`s: the engine's load view (the one the
/// native `session/load` pages) converted on the blocking pool, since a long session takes
/// milliseconds to convert. A restored session's stored entries are used as they are, so a
/// load parses none of its history.
async fn replay_history(bridge: &Arc<Bridge>, handle: &SessionHandle) -> Result<(), AcpError> {
    let shared = handle.shared.clone();
    let notices = bridge.clone();
    let updates = tokio::task::spawn_blocking(move || {
        shared.load_view(|view| {
            convert::replay(&shared.workspace, &view, &|text| {
                notices.notice_update(text)
            })
        })
    })
    .await
    .map_err(|e| {
        error(
            ErrorKind::Internal,
            format!("replaying the session's history crashed: {e}"),
            Value::Null,
        )
    })?;
    for update in updates {
        bridge.send_update(update);
    }
    let plan = handle.shared.plan();
    if !plan.is_empty() {
        bridge.send_update(convert::plan_update(&plan));
    }
    Ok(())
}
