//! Running an authorized batch: contiguous low-risk calls concurrently, every other call alone
//! in call order, results committed in call order; questions to the user.
//!
//! Invariants: invariant 3 (authorize all, then execute, results in call order) and invariant 5
//! (a stop interrupts a running tool: SIGINT, then SIGKILL after a grace period).

use super::*;

impl Turn {
    /// Authorize every call in order, then execute. Returns false if the turn was stopped; every
    /// call has a committed result either way.
    pub(super) async fn run_tools(
        &mut self,
        calls: &[ToolCallRecord],
        mut early: HashMap<usize, JoinHandle<ToolOutcome>>,
        mode: Mode,
    ) -> bool {
        self.result_share = self.result_share_for(calls.len());
        // Phase A: authorize in call order. Nothing runs yet except early-started reads.
        let mut prepared: Vec<Prepared> = Vec::with_capacity(calls.len());
        for (index, call) in calls.iter().enumerate() {
            if self.cancel.is_cancelled() {
                abort_all(&mut early);
                self.interrupt_rest(calls);
                return false;
            }
            match self.authorize(call, mode).await {
                Some(p) => {
                    // A read that turned out to need approval (a secret) must not use a result
                    // started before it was approved.
                    if self.needs_fresh_run.contains(&call.id) {
                        if let Some(handle) = early.remove(&index) {
                            handle.abort();
                        }
                    }
                    prepared.push(p);
                }
                None => {
                    abort_all(&mut early);
                    self.interrupt_rest(calls);
                    return false;
                }
            }
        }

        // Phase B: execute. Contiguous low-risk runs go concurrently; everything else alone.
        let mut index = 0;
        while index < calls.len() {
            if self.cancel.is_cancelled() {
                abort_all(&mut early);
                self.interrupt_rest(&calls[index..]);
                return false;
            }
            let is_low = |p: &Prepared| {
                matches!(
                    p,
                    Prepared::Run {
                        risk: Risk::Low,
                        ..
                    }
                )
            };
            if is_low(&prepared[index]) {
                let end = (index..calls.len())
                    .find(|&j| !is_low(&prepared[j]))
                    .unwrap_or(calls.len());
                let mut handles = Vec::with_capacity(end - index);
                for (offset, slot) in prepared[index..end].iter_mut().enumerate() {
                    let i = index + offset;
                    let handle = match early.remove(&i) {
                        Some(handle) => handle,
                        None => {
                            let Prepared::Run { args, .. } = std::mem::replace(
                                slot,
                                Prepared::Done {
                                    status: ResultStatus::Failed,
                                    text: String::new(),
                                },
                            ) else {
                                continue;
                            };
                            self.emit(Event::ToolCallUpdate {
                                tool_call_id: calls[i].id.clone(),
                                status: ToolStatus::Running,
                                output: None,
                                result: None,
                                diff: None,
                            });
                            match args {
                                ToolArgs::UpdatePlan { entries } => {
                                    let outcome = self.update_plan(entries);
                                    tokio::spawn(async move { outcome })
                                }
                                ToolArgs::Mcp { .. } => self.spawn_mcp_call(&calls[i], args),
                                args => tokio::spawn(client_fs::read_only(
                                    self.session.workspace.clone(),
                                    self.session.client_fs.clone(),
                                    args,
                                )),
                            }
                        }
                    };
                    handles.push((i, handle));
                }
                let mut handles = handles.into_iter();
                while let Some((i, handle)) = handles.next() {
                    let abort = handle.abort_handle();
                    let outcome = tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => None,
                        joined = handle => Some(joined),
                    };
                    match outcome {
                        None => {
                            abort.abort();
                            for (_, rest) in handles.by_ref() {
                                rest.abort();
                            }
                            abort_all(&mut early);
                            self.interrupt_rest(&calls[i..]);
                            return false;
                        }
                        Some(joined) => self.commit_joined(&calls[i], joined, "the tool"),
                    }
                }
                index = end;
                continue;
            }
            let slot = std::mem::replace(
                &mut prepared[index],
                Prepared::Done {
                    status: ResultStatus::Failed,
                    text: String::new(),
                },
            );
            let call = &calls[index];
            match slot {
                Prepared::Done { status, text } => self.commit_result(call, status, text, None),
                Prepared::Run {
                    args, plan, edited, ..
                } => {
                    if !self.execute_alone(call, args, plan, edited).await {
                        self.interrupt_rest(&calls[index + 1..]);
                        return false;
                    }
                }
            }
            index += 1;
        }
        true
    }

    /// Execute one non-read call alone. Returns false if the turn was stopped during it (its
    /// result is committed as interrupted).
    pub(super) async fn execute_alone(
        &mut self,
        call: &ToolCallRecord,
        args: ToolArgs,
        plan: Option<Box<PlannedEdit>>,
        edited: Option<String>,
    ) -> bool {
        self.emit(Event::ToolCallUpdate {
            tool_call_id: call.id.clone(),
            status: ToolStatus::Running,
            output: None,
            result: None,
            diff: None,
        });
        match args {
            ToolArgs::WriteFile { .. } | ToolArgs::EditFile { .. } => {
                let Some(plan) = plan else {
                    self.commit_result(
                        call,
                        ResultStatus::Failed,
                        "internal error: edit without a plan".into(),
                        None,
                    );
                    return true;
                };
                let workspace = self.session.workspace.clone();
                let diff = match &edited {
                    // The user's version is compared off the async workers: a large file
                    // takes up to the diff deadline.
                    Some(content) => {
                        let (path, old, new) = (
                            plan.diff.path.clone(),
                            plan.old_content.clone(),
                            content.clone(),
                        );
                        tokio::task::spawn_blocking(move || {
                            crate::workspace::diff::file_diff(&path, old.as_deref(), &new)
                        })
                        .await
                        .unwrap_or_else(|_| plan.diff.clone())
                    }
                    None => plan.diff.clone(),
                };
                // The file's prior state (and the folders the write creates) is recorded and
                // made durable with the call's start, so the turn can be rewound.
                let checkpoint = match self.session.recorder() {
                    Some(recorder) => {
                        let (turn_id, path) = (self.turn_id.clone(), plan.path.clone());
                        let r = recorder.clone();
                        tokio::task::spawn_blocking(move || r.before_edit(&turn_id, &path))
                            .await
                            .ok()
                            .map(|ids| (recorder, ids))
                    }
                    None => None,
                };
                // A write is not interrupted halfway: it is short and atomic, and a stop that
                // arrives during it takes effect right after it is recorded.
                if !self.ready_for_side_effect(call).await {
                    return true;
                }
                let outcome = match self.session.client_fs.clone() {
                    Some(client) => {
                        client_fs::apply(workspace, client, &plan, edited.as_deref()).await
                    }
                    None => tokio::task::spawn_blocking(move || {
                        apply_edit(&workspace, &plan, edited.as_deref())
                    })
                    .await
                    .unwrap_or_else(|e| ToolOutcome {
                        output: format!("the edit crashed: {e}"),
                        is_error: true,
                    }),
                };
                let status = if outcome.is_error {
                    ResultStatus::Failed
                } else {
                    ResultStatus::Completed
                };
                if let Some((recorder, ids)) = checkpoint {
                    let turn_id = self.turn_id.clone();
                    let _ =
                        tokio::task::spawn_blocking(move || recorder.after_edit(&turn_id, &ids))
                            .await;
                }
                let shown = (!outcome.is_error).then_some(&diff);
                self.commit_result(call, status, outcome.output, shown);
                self.session.after_side_effect(&call.id);
                true
            }
            ToolArgs::Shell {
                command,
                timeout_ms,
            } => {
                let timeout = timeout_ms
                    .map(Duration::from_millis)
                    .unwrap_or(shell::DEFAULT_TIMEOUT)
                    .min(shell::MAX_TIMEOUT);
                let roots = self.session.workspace.roots().to_vec();
                let (read_only, hidden) = {
                    let roots = roots.clone();
                    let own_files = self.session.workspace.own_files().clone();
                    let fallback = (own_files.paths().to_vec(), Vec::new());
                    // It looks at the roots' `.git` entries and tandem's data directory, so it
                    // runs off the async workers.
                    tokio::task::spawn_blocking(move || {
                        (
                            sandbox::read_only_paths(&roots, &own_files),
                            own_files.hidden_files(),
                        )
                    })
                    .await
                    .unwrap_or(fallback)
                };
                let sandbox = Confinement::new(
                    &sandbox::status().await,
                    SandboxPolicy {
                        writable: roots,
                        read_only,
                        hidden,
                        network: self.session.settings().allow_network,
                    },
                );
                let request = ShellRequest {
                    command,
                    cwd: self.session.workspace.roots()[0].clone(),
                    timeout,
                    kill_grace: Duration::from_millis(
                        self.session.engine.config.shell_kill_grace_ms,
                    ),
                    sandbox,
                    env: self.session.engine.config.command_environment(),
                    max_processes: Some(self.session.engine.config.shell_max_processes),
                };
                // What the workspace holds before the command, recorded and made durable with
                // the call's start, so whatever the command changes can be put back.
                let baseline = match self.session.recorder() {
                    Some(recorder) => {
                        let (turn_id, call_id) = (self.turn_id.clone(), call.id.clone());
                        let r = recorder.clone();
                        tokio::task::spawn_blocking(move || r.before_command(&turn_id, &call_id))
                            .await
                            .ok()
                            .map(|baseline| (recorder, baseline))
                    }
                    None => None,
                };
                if !self.ready_for_side_effect(call).await {
                    // Not run: its manifest must not be settled against later changes.
                    if let Some((recorder, _)) = &baseline {
                        recorder
                            .store
                            .clear_pending_scan(&recorder.session_id, &call.id);
                    }
                    return true;
                }
                let session = self.session.clone();
                let turn_id = self.turn_id.clone();
                let tool_call_id = call.id.clone();
                // Protected files a mount cannot cover (they do not exist yet) are checked after.
                let sentinel_roots = self.session.workspace.roots().to_vec();
                let sentinels = tokio::task::spawn_blocking(move || {
                    sandbox::ProtectedSentinels::before(&sentinel_roots)
                })
                .await
                .unwrap_or_default();
                let result = shell::run(request, &self.cancel, |chunk| {
                    session.emit(
                        Some(&turn_id),
                        Event::ToolCallUpdate {
                            tool_call_id: tool_call_id.clone(),
                            status: ToolStatus::Running,
                            output: Some(chunk.to_owned()),
                            result: None,
                            diff: None,
                        },
                    );
                    session
                        .emitter
                        .stream_room()
                        .map(|room| Box::pin(room) as shell::OutputPause)
                })
                .await;
                if let Some((recorder, baseline)) = baseline {
                    let turn_id = self.turn_id.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        recorder.after_command(&turn_id, baseline)
                    })
                    .await;
                }
                let mut text = result.model_text(timeout);
                if let Ok(Some(note)) = tokio::task::spawn_blocking(move || sentinels.after()).await
                {
                    text.push('\n');
                    text.push_str(&note);
                }
                let keep_going = match result.end {
                    shell::ShellEnd::Interrupted => {
                        self.commit_result(call, ResultStatus::Interrupted, text, None);
                        false
                    }
                    _ => {
                        let status = if result.is_success() {
                            ResultStatus::Completed
                        } else {
                            ResultStatus::Failed
                        };
                        self.commit_result(call, status, text, None);
                        true
                    }
                };
                self.session.after_side_effect(&call.id);
                keep_going
            }
            ToolArgs::Mcp { .. } => {
                // Another program's side effect: marked started (durably) first, so a crash
                // never runs it twice.
                if !self.ready_for_side_effect(call).await {
                    return true;
                }
                let handle = self.spawn_mcp_call(call, args);
                let abort = handle.abort_handle();
                let joined = tokio::select! {
                    biased;
                    _ = self.cancel.cancelled() => None,
                    joined = handle => Some(joined),
                };
                let keep_going = match joined {
                    None => {
                        abort.abort();
                        self.commit_result(
                            call,
                            ResultStatus::Interrupted,
                            "interrupted by the user while the MCP server ran it; it may have done part of its work".to_owned(),
                            None,
                        );
                        false
                    }
                    Some(joined) => {
                        self.commit_joined(call, joined, "the MCP call");
                        true
                    }
                };
                self.session.after_side_effect(&call.id);
                keep_going
            }
            ToolArgs::AskUser { question, choices } => {
                self.ask(call, question, choices, None).await
            }
            ToolArgs::ProposePlan { plan } => {
                self.ask(
                    call,
                    "Do you accept this plan?".to_owned(),
                    Some(vec!["accept".to_owned(), "reject".to_owned()]),
                    Some(plan),
                )
                .await
            }
            ToolArgs::UpdatePlan { entries } => {
                let outcome = self.update_plan(entries);
                self.commit_result(call, ResultStatus::Completed, outcome.output, None);
                true
            }
            read => {
                // Read-only tools are normally batched; one that lands here still runs.
                let outcome = client_fs::read_only(
                    self.session.workspace.clone(),
                    self.session.client_fs.clone(),
                    read,
                )
                .await;
                let status = if outcome.is_error {
                    ResultStatus::Failed
                } else {
                    ResultStatus::Completed
                };
                self.commit_result(call, status, outcome.output, None);
                true
            }
        }
    }

    pub(super) async fn ask(
        &mut self,
        call: &ToolCallRecord,
        question: String,
        choices: Option<Vec<String>>,
        plan: Option<String>,
    ) -> bool {
        if !self.session.engine.client_can_answer() {
            self.commit_result(
                call,
                ResultStatus::Failed,
                "no client is able to answer questions right now; continue with your best judgement and say what you assumed".to_owned(),
                None,
            );
            return true;
        }
        let is_plan = plan.is_some();
        let recorded = self
            .recorded
            .remove(&call.id)
            .filter(|r| r.kind == PendingKind::Question.as_str());
        let earlier = recorded
            .as_ref()
            .and_then(|r| r.decision.as_deref())
            .and_then(|d| RecordedDecision::parse(PendingKind::Question, d))
            .and_then(|d| match d {
                RecordedDecision::Answer { answer } => Some(answer),
                RecordedDecision::Approval { .. } => None,
            });
        let request_id = recorded
            .map(|r| r.request_id)
            .unwrap_or_else(|| crate::engine::history::new_id("r"));
        let resolution = match earlier {
            // Answered before a crash: not asked again.
            Some(answer) => Some(Resolution::Answer(answer)),
            None => {
                let event = Event::QuestionAsked {
                    request_id: request_id.clone(),
                    tool_call_id: call.id.clone(),
                    question,
                    choices,
                    plan,
                };
                self.notification_hooks("tandem is asking you a question".to_owned());
                let receiver = self.register_pending(
                    &request_id,
                    PendingKind::Question,
                    &call.id,
                    &event,
                    ProposalShown::Whole,
                );
                self.emit(event);
                let resolution = self.wait_pending(&request_id, receiver).await;
                if let Some(Resolution::Answer(answer)) = &resolution {
                    self.session.persist_decision(
                        &request_id,
                        &RecordedDecision::Answer {
                            answer: answer.clone(),
                        },
                    );
                }
                resolution
            }
        };
        match resolution {
            Some(Resolution::Answer(answer)) => {
                let text = if is_plan {
                    format!("The user responded to the plan: {answer}")
                } else {
                    format!("The user answered: {answer}")
                };
                self.commit_result(call, ResultStatus::Completed, text, None);
                true
            }
            Some(Resolution::Approval { .. }) | None => {
                self.commit_result(
                    call,
                    ResultStatus::Interrupted,
                    "interrupted by user".to_owned(),
                    None,
                );
                false
            }
        }
    }
}

pub(super) fn abort_all(early: &mut HashMap<usize, JoinHandle<ToolOutcome>>) {
    for (_, handle) in early.drain() {
        handle.abort();
    }
}

impl Turn {
    /// Commit the result of a tool task that ran to its end: its outcome, or a tool error
    /// naming `what` crashed (a panic in the task).
    fn commit_joined(
        &self,
        call: &ToolCallRecord,
        joined: Result<ToolOutcome, tokio::task::JoinError>,
        what: &str,
    ) {
        let outcome = joined.unwrap_or_else(|e| ToolOutcome {
            output: format!("{what} crashed: {e}"),
            is_error: true,
        });
        let status = if outcome.is_error {
            ResultStatus::Failed
        } else {
            ResultStatus::Completed
        };
        self.commit_result(call, status, outcome.output, None);
    }

    /// Run an MCP call as a task: its text comes back as a tool outcome (a tool error for a
    /// server's `isError`, a timeout or a dead server, each naming the server), its images
    /// wait in `mcp_images` for the result's commit. The turn's cancel reaches the call.
    pub(super) fn spawn_mcp_call(
        &self,
        call: &ToolCallRecord,
        args: ToolArgs,
    ) -> JoinHandle<ToolOutcome> {
        let hub = self.session.mcp.clone();
        let cancel = self.cancel.clone();
        let images = self.mcp_images.clone();
        let (name, id) = (call.name.clone(), call.id.clone());
        tokio::spawn(async move {
            let ToolArgs::Mcp { arguments, .. } = args else {
                return ToolOutcome {
                    output: "internal error: not an MCP call".to_owned(),
                    is_error: true,
                };
            };
            match hub.call(&name, arguments, &cancel).await {
                Ok(output) => {
                    if !output.images.is_empty() {
                        images
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(id, output.images);
                    }
                    ToolOutcome {
                        output: output.text,
                        is_error: output.is_error,
                    }
                }
                Err(e) => ToolOutcome {
                    output: e.to_string(),
                    is_error: true,
                },
            }
        })
    }
}

impl Turn {
    /// `update_plan`: the session's plan becomes `entries` (stored, announced as `plan`); the
    /// model is told it took.
    fn update_plan(&self, entries: Vec<crate::protocol::PlanEntry>) -> ToolOutcome {
        let done = entries
            .iter()
            .filter(|e| e.status == crate::protocol::PlanStatus::Completed)
            .count();
        let total = entries.len();
        self.session.set_plan(Some(&self.turn_id), entries);
        ToolOutcome {
            output: format!("Plan updated: {done} of {total} steps completed."),
            is_error: false,
        }
    }
}
