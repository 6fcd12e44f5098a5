//! Authorizing one call: the permission verdict, protected and credential paths, the approval
//! (diff planned off the async workers, cut to a frame), recorded decisions after a crash, and
//! the rules an answer remembers.
//!
//! Invariants: default deny when nobody can answer (invariant 4); an approval binds to its
//! request and call; a decision recorded before a crash is not asked again (invariant 8).

use super::record::diff_entry;
use super::*;

impl Turn {
    /// Decide one call. `None` means the turn was stopped while waiting for the user.
    pub(super) async fn authorize(
        &mut self,
        call: &ToolCallRecord,
        mode: Mode,
    ) -> Option<Prepared> {
        if let Some(text) = self.refused.remove(&call.id) {
            self.announce_unparsed(call, &Value::Object(Default::default()));
            return Some(Prepared::Done {
                status: ResultStatus::Failed,
                text,
            });
        }
        let value: Value = match serde_json::from_str(arguments_or_empty(&call.arguments)) {
            Ok(v) => v,
            Err(e) => {
                self.announce_unparsed(call, &Value::String(call.arguments.clone()));
                return Some(Prepared::Done {
                    status: ResultStatus::Failed,
                    text: format!(
                        "the arguments of {} are not valid JSON ({e}); call it again with a JSON object",
                        call.name
                    ),
                });
            }
        };
        // A tool of an MCP server: its arguments are whatever its schema asks for, its risk
        // what the session's definition of the server makes of its annotations.
        let mcp_tool = self.session.mcp.tool(&call.name);
        if mcp_tool.is_none() && call.name.starts_with(crate::mcp::names::PREFIX) {
            // Its server is down (exited, failed) or never had it: the hub names the server
            // and why, which "unknown tool" would not.
            self.announce_unparsed(call, &value);
            return Some(Prepared::Done {
                status: ResultStatus::Failed,
                text: self.session.mcp.why_unavailable(&call.name),
            });
        }
        let args = match &mcp_tool {
            Some(tool) => ToolArgs::Mcp {
                server: tool.server.clone(),
                tool: tool.tool.clone(),
                arguments: value.clone(),
            },
            None => match parse_args(&call.name, &value) {
                Ok(args) => args,
                Err(text) => {
                    self.announce_unparsed(call, &value);
                    return Some(Prepared::Done {
                        status: ResultStatus::Failed,
                        text,
                    });
                }
            },
        };
        self.announce(&call.id, &call.name, &value, &args);
        let (risk, kind) = match &mcp_tool {
            Some(tool) => (mcp_risk(tool), mcp_kind(tool)),
            None => match meta_for(&call.name) {
                Some(meta) => (meta.risk, meta.kind),
                None => {
                    return Some(Prepared::Done {
                        status: ResultStatus::Failed,
                        text: format!("unknown tool {}", call.name),
                    })
                }
            },
        };
        // The user's PreToolUse hooks decide first: a block ends the call here, before any
        // planning; `allow` and `ask` shape the verdict below.
        let hook = self.pre_tool_hooks(call, &value).await?;
        if let Some(reason) = hook.blocked {
            return Some(Prepared::Done {
                status: ResultStatus::Denied,
                text: format!("blocked by a hook, so it did not run: {reason}"),
            });
        }
        let mut verdict = self.session.verdict(mode, &call.name, risk, args.command());
        // A credential file or a project file that runs code: asked in every mode, each time, with
        // no "always" option.
        let mut asked_each_time = false;
        let changed_path = match &args {
            ToolArgs::EditFile { path, .. } | ToolArgs::WriteFile { path, .. } => {
                Some(path.clone())
            }
            _ => None,
        };
        let secret_access = match &args {
            ToolArgs::ReadFile { path, .. } => Some((path.clone(), SecretAccess::Read)),
            ToolArgs::EditFile { path, .. } => Some((path.clone(), SecretAccess::Edit)),
            ToolArgs::WriteFile { path, .. } => Some((path.clone(), SecretAccess::Write)),
            _ => None,
        };
        if let Some((path, access)) =
            secret_access.filter(|_| !matches!(verdict, Verdict::Refuse { .. }))
        {
            // Files that may hold secrets need an explicit approval, in every mode, for every
            // tool that reveals their content (an edit tells whether `old_string` is there);
            // checked on the resolved path so a link cannot hide one.
            let workspace = self.session.workspace.clone();
            let reason = tokio::task::spawn_blocking(move || {
                crate::tools::fs::secret_access_reason(&workspace, &path, access)
            })
            .await
            .ok()
            .flatten();
            if let Some(reason) = reason {
                asked_each_time = true;
                self.needs_fresh_run.insert(call.id.clone());
                verdict = Verdict::Ask { reason };
            }
        }
        if let Some(path) =
            changed_path.filter(|_| !asked_each_time && !matches!(verdict, Verdict::Refuse { .. }))
        {
            // Project files that run code (tasks, launch configs, pre-commit) are asked every
            // time, also in fullAuto, with no rule to cover them.
            let workspace = self.session.workspace.clone();
            let reason = tokio::task::spawn_blocking(move || {
                crate::tools::fs::ask_change_reason(&workspace, &path)
            })
            .await
            .ok()
            .flatten();
            if let Some(reason) = reason {
                asked_each_time = true;
                verdict = Verdict::Ask { reason };
            }
        }
        if matches!(args, ToolArgs::Shell { .. }) && !matches!(verdict, Verdict::Refuse { .. }) {
            let network = self.session.settings().allow_network;
            if let Some(reason) = sandbox::status().await.approval_reason(network) {
                // Without a sandbox (or one that cannot keep the network closed) nothing limits
                // a command, so the user sees every one.
                verdict = Verdict::Ask { reason };
            }
        }
        match (&hook.ask, &mut verdict) {
            (Some(reason), Verdict::Allow) => {
                verdict = Verdict::Ask {
                    reason: reason.clone(),
                }
            }
            (Some(reason), Verdict::Ask { reason: why }) => {
                why.push_str("; ");
                why.push_str(reason);
            }
            // A hook's `allow` answers the approval the user would have been asked, but never
            // one asked each time (credentials, files that run code) nor a refusal.
            (None, Verdict::Ask { .. }) if hook.allowed && !asked_each_time => {
                verdict = Verdict::Allow
            }
            _ => {}
        }
        // Edits are planned now so the approval can show the diff and a bad edit fails early,
        // except on a file asked each time: there the failure itself says something about the content
        // ("old_string not found"), so the model learns it only after the user approved.
        let mut failed_plan: Option<String> = None;
        let plan = match &args {
            ToolArgs::WriteFile { .. } | ToolArgs::EditFile { .. }
                if !matches!(verdict, Verdict::Refuse { .. }) =>
            {
                let planned = tokio::select! {
                    biased;
                    // Planning runs on the blocking pool and may take up to the diff deadline
                    // on a huge rewrite; a stop does not wait for it (its result is dropped).
                    _ = self.cancel.cancelled() => return None,
                    planned = self.plan(args.clone()) => planned,
                };
                match planned {
                    Ok(plan) => {
                        if plan.diff.shape == DiffShape::WholeFile {
                            if let Verdict::Ask { reason } = &mut verdict {
                                reason.push_str(
                                    "; the change is too large to compare line by line in time, so the diff shows the whole file replaced",
                                );
                            }
                        }
                        Some(Box::new(plan))
                    }
                    Err(text) if asked_each_time => {
                        if let Verdict::Ask { reason } = &mut verdict {
                            reason.push_str(&format!(
                                "; as proposed it cannot be applied ({text}), and approving only tells the model that"
                            ));
                        }
                        failed_plan = Some(text);
                        None
                    }
                    Err(text) => {
                        return Some(Prepared::Done {
                            status: ResultStatus::Failed,
                            text,
                        })
                    }
                }
            }
            _ => None,
        };
        match verdict {
            Verdict::Allow => Some(Prepared::Run {
                args,
                risk,
                plan,
                edited: None,
            }),
            Verdict::Refuse { reason } => Some(Prepared::Done {
                status: ResultStatus::Failed,
                text: reason,
            }),
            Verdict::Ask { reason } => {
                if !self.session.engine.client_can_answer() {
                    return Some(Prepared::Done {
                        status: ResultStatus::Denied,
                        text: "denied: no client is able to answer approvals, so tandem denies by default"
                            .to_owned(),
                    });
                }
                let command = args.command().map(str::to_owned);
                // A decision recorded before a crash is not asked again (invariant 8).
                let recorded = self.recorded.remove(&call.id);
                let earlier = recorded
                    .as_ref()
                    .filter(|r| r.kind == PendingKind::Approval.as_str())
                    .and_then(|r| r.decision.as_deref())
                    .and_then(|d| RecordedDecision::parse(PendingKind::Approval, d))
                    .and_then(|d| match d {
                        RecordedDecision::Approval {
                            decision,
                            message,
                            edited_content,
                        } => Some((decision, message, edited_content)),
                        RecordedDecision::Answer { .. } => None,
                    });
                // A recorded decision already left its rule in the store, so it is not
                // remembered again.
                let (decision, message, edited_content, deny_memory) = match earlier {
                    Some((decision, message, edited)) => {
                        (decision, message, edited, DenyMemory::ThisCallOnly)
                    }
                    None => {
                        let request_id = recorded
                            .map(|r| r.request_id)
                            .unwrap_or_else(|| crate::engine::history::new_id("r"));
                        let event = Event::ApprovalRequested {
                            arguments_digest: crate::protocol::arguments_digest(&call.name, &value),
                            request_id: request_id.clone(),
                            tool_call_id: call.id.clone(),
                            name: call.name.clone(),
                            kind,
                            title: args.title(),
                            reason,
                            arguments: value.clone(),
                            mcp: args.mcp_ref(),
                            diff: plan.as_ref().map(|p| vec![diff_entry(&p.diff)]),
                            cwd: command
                                .as_ref()
                                .map(|_| self.session.workspace.roots()[0].display().to_string()),
                            command: command.clone(),
                            options: if asked_each_time {
                                // Each such read or change is its own decision; no rule covers them.
                                approval_options(&call.name, None)
                                    .into_iter()
                                    .filter(|o| {
                                        matches!(o.decision, Decision::Once | Decision::Deny)
                                    })
                                    .collect()
                            } else {
                                approval_options(&call.name, command.as_deref())
                            },
                        };
                        let estimate = call.arguments.len()
                            + plan.as_ref().map_or(0, |p| {
                                p.diff.old_text.as_ref().map_or(0, String::len)
                                    + p.diff.new_text.len()
                                    + p.diff.unified.len()
                            });
                        let Some((event, shown)) = fit_approval(event, estimate).await else {
                            return Some(Prepared::Done {
                                status: ResultStatus::Failed,
                                text: "tandem could not prepare this change for review, so it was not applied; try a smaller change".to_owned(),
                            });
                        };
                        self.notification_hooks(format!(
                            "tandem needs your permission to use {}",
                            call.name
                        ));
                        let receiver = self.register_pending(
                            &request_id,
                            PendingKind::Approval,
                            &call.id,
                            &event,
                            shown,
                        );
                        self.emit(event);
                        let resolution = self.wait_pending(&request_id, receiver).await;
                        let Some(Resolution::Approval {
                            decision,
                            message,
                            edited_content,
                            deny_memory,
                        }) = resolution
                        else {
                            // Stopped while waiting: the approval is withdrawn.
                            self.emit(Event::ApprovalResolved {
                                request_id,
                                decision: Decision::Deny,
                            });
                            return None;
                        };
                        self.session.persist_decision(
                            &request_id,
                            &RecordedDecision::Approval {
                                decision,
                                message: message.clone(),
                                edited_content: edited_content.clone(),
                            },
                        );
                        self.emit(Event::ApprovalResolved {
                            request_id,
                            decision,
                        });
                        (decision, message, edited_content, deny_memory)
                    }
                };
                if decision == Decision::Deny && deny_memory == DenyMemory::RestOfSession {
                    let rule = match &command {
                        Some(command) => {
                            let prefix = suggested_prefix(command);
                            let prefix = if prefix.is_empty() {
                                command.trim().to_owned()
                            } else {
                                prefix
                            };
                            (RuleKind::DenyCommandPrefix, prefix)
                        }
                        None => (RuleKind::DenyTool, call.name.clone()),
                    };
                    self.session.remember_rule(rule.0, rule.1);
                }
                match decision {
                    Decision::Deny => Some(Prepared::Done {
                        status: ResultStatus::Denied,
                        text: match message.filter(|m| !m.trim().is_empty()) {
                            Some(m) => format!("denied by user: {m}"),
                            None => "denied by user".to_owned(),
                        },
                    }),
                    Decision::Once | Decision::AlwaysTool | Decision::AlwaysCommand => {
                        match (decision, &command) {
                            (Decision::AlwaysTool, _) => self
                                .session
                                .remember_rule(RuleKind::AllowTool, call.name.clone()),
                            (Decision::AlwaysCommand, Some(command)) => {
                                let prefix = suggested_prefix(command);
                                if !prefix.is_empty() {
                                    self.session
                                        .remember_rule(RuleKind::AllowCommandPrefix, prefix);
                                }
                            }
                            _ => {}
                        }
                        if let Some(text) = failed_plan {
                            return Some(Prepared::Done {
                                status: ResultStatus::Failed,
                                text,
                            });
                        }
                        let edited = edited_content.filter(|_| plan.is_some());
                        Some(Prepared::Run {
                            args,
                            risk,
                            plan,
                            edited,
                        })
                    }
                }
            }
        }
    }

    pub(super) async fn plan(&self, args: ToolArgs) -> Result<PlannedEdit, String> {
        let workspace = self.session.workspace.clone();
        if let Some(client) = self.session.client_fs.clone() {
            return client_fs::plan(workspace, client, args).await;
        }
        tokio::task::spawn_blocking(move || match args {
            ToolArgs::WriteFile { path, content } => plan_write(&workspace, &path, &content),
            ToolArgs::EditFile {
                path,
                old_string,
                new_string,
                replace_all,
            } => plan_edit(&workspace, &path, &old_string, &new_string, replace_all),
            other => Err(format!("internal error: {} is not an edit", other.title())),
        })
        .await
        .unwrap_or_else(|e| Err(format!("planning the edit crashed: {e}")))
    }

    pub(super) fn register_pending(
        &self,
        request_id: &str,
        kind: PendingKind,
        tool_call_id: &str,
        event: &Event,
        shown: ProposalShown,
    ) -> oneshot::Receiver<Resolution> {
        let (sender, receiver) = oneshot::channel();
        let payload = serde_json::to_value(event).unwrap_or(Value::Null);
        // The inbox row is committed before the event that announces it.
        self.session
            .persist_pending(request_id, kind, tool_call_id, &self.turn_id, &payload);
        self.session.open_pending(
            request_id.to_owned(),
            PendingRequest {
                kind,
                tool_call_id: tool_call_id.to_owned(),
                turn_id: self.turn_id.clone(),
                payload,
                shown,
                sender,
            },
        );
        receiver
    }

    /// Wait for the user, or for a stop. On stop the pending entry is removed so a late answer
    /// gets `staleApproval`.
    pub(super) async fn wait_pending(
        &self,
        request_id: &str,
        receiver: oneshot::Receiver<Resolution>,
    ) -> Option<Resolution> {
        let result = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => None,
            r = receiver => r.ok(),
        };
        if result.is_none() {
            self.session.forget_pending(request_id);
        }
        result
    }
}

/// Fit an `approvalRequested` under [`fit::APPROVAL_DISPLAY_BYTES`], so it and the
/// `session/load` that shows it again stay under the frame cap. A proposal of an 8 MiB file
/// carries the file twice plus the unified diff; cut, the approval says so in its `reason`, and
/// the request is marked [`ProposalShown::Cut`] so an `approve` with `editedContent` is refused:
/// an edit of a text the user never saw whole would write the cut. `estimate` (the raw
/// arguments and the diff's texts) keeps the common case free of a serialization pass; the
/// exact check and the cut run off the async workers.
pub(super) async fn fit_approval(event: Event, estimate: usize) -> Option<(Event, ProposalShown)> {
    if estimate < fit::APPROVAL_DISPLAY_BYTES / 8 {
        return Some((event, ProposalShown::Whole));
    }
    let fitted = tokio::task::spawn_blocking(move || {
        if fit::serialized_len(&event) <= fit::APPROVAL_DISPLAY_BYTES {
            return (event, ProposalShown::Whole);
        }
        let Ok(mut value) = serde_json::to_value(&event) else {
            return (event, ProposalShown::Cut);
        };
        // The reason's sentence is added first, so the cut leaves room for it.
        if let Some(Value::String(reason)) = value.get_mut("reason") {
            if !reason.ends_with(['.', '!', '?']) {
                reason.push('.');
            }
            reason.push_str(
                " The change is too large to show in full: parts of it are cut, each cut says how much it leaves out. Approve or deny it as proposed; it cannot be edited before it is applied.",
            );
        }
        let cut = fit::fit_value(&mut value, fit::APPROVAL_DISPLAY_BYTES);
        tracing::info!(cut, "an approval's proposal was cut to fit one message");
        match serde_json::from_value::<Event>(value) {
            Ok(fitted) => (fitted, ProposalShown::Cut),
            Err(_) => (event, ProposalShown::Cut),
        }
    })
    .await;
    // The task cannot panic short of a bug; then the change is not shown and not applied.
    fitted
        .map_err(|e| tracing::error!("fitting an approval crashed: {e}"))
        .ok()
}

pub(super) fn approval_options(tool: &str, command: Option<&str>) -> Vec<ApprovalOption> {
    let mut options = vec![
        ApprovalOption {
            decision: Decision::Once,
            label: "Allow once".to_owned(),
            command_prefix: None,
        },
        ApprovalOption {
            decision: Decision::AlwaysTool,
            label: format!("Always allow {tool}"),
            command_prefix: None,
        },
    ];
    if let Some(command) = command {
        let prefix = suggested_prefix(command);
        if !prefix.is_empty() {
            options.push(ApprovalOption {
                decision: Decision::AlwaysCommand,
                label: format!("Always allow commands starting with `{prefix}`"),
                command_prefix: Some(prefix),
            });
        }
    }
    options.push(ApprovalOption {
        decision: Decision::Deny,
        label: "Deny".to_owned(),
        command_prefix: None,
    });
    options
}

/// The risk of an MCP tool: low (no approval, runs beside reads) only when its server's
/// definition trusts read-only annotations and the tool has one; otherwise external.
pub(super) fn mcp_risk(tool: &crate::mcp::McpTool) -> Risk {
    if tool.low_risk {
        Risk::Low
    } else {
        Risk::External
    }
}

/// What an MCP tool's card shows it as, from its annotations (the server's word: it only
/// picks an icon, never a permission).
pub(super) fn mcp_kind(tool: &crate::mcp::McpTool) -> crate::protocol::ToolKind {
    if tool.read_only_hint {
        crate::protocol::ToolKind::Read
    } else if tool.destructive_hint {
        crate::protocol::ToolKind::Delete
    } else {
        crate::protocol::ToolKind::Other
    }
}
