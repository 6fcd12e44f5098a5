//! The session's hooks: loading its [`HookSet`] once (the user's file, the project's files read
//! through the confined workspace, and whether the user trusted their content), running the
//! hooks of an event in parallel, announcing each run (`hookRan`) and each failure (a warning
//! notice), and folding their answers into one [`HookOutcome`] the turn acts on.
//!
//! Invariants: a project hook runs only while the trust stored for the folder names the hash of
//! the very bytes this session parsed; an event without matching hooks costs no process and no
//! await beyond the first load; a `PreToolUse` hook that cannot give an answer (not started,
//! timed out, killed, another exit code, bad JSON) blocks its call with the reason (fail
//! closed), every other event's failure only warns.
//! Does not: decide what a block does to a turn (the turn loop does), or run hooks for the
//! model's text or inside the command sandbox.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::conversation::Conversation;
use super::history::{Message, NoticeKind};
use crate::hooks::run::{self as hook_run, HookAnswer, HookEnvironment};
use crate::hooks::{self, Hook, HookEvent, HookSet, HookSource, ProjectHooks};
use crate::protocol::Event;

/// The user's hook file, under tandem's config folder.
pub fn user_hooks_path() -> Option<std::path::PathBuf> {
    dirs::config_dir().map(|d| d.join("tandem").join("hooks.json"))
}

/// A session's hooks, loaded on first use.
#[derive(Default)]
pub struct SessionHooks {
    set: tokio::sync::OnceCell<Arc<HookSet>>,
    /// The running `SessionStart` hooks; the first turn waits for them and takes their context.
    start: std::sync::Mutex<Option<tokio::task::JoinHandle<Vec<String>>>>,
}

impl SessionHooks {
    /// Keep the task running the `SessionStart` hooks for the first turn.
    pub fn set_session_start(&self, task: tokio::task::JoinHandle<Vec<String>>) {
        *self.start.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    }

    /// The `SessionStart` hooks' context, once (later calls get nothing).
    pub async fn take_session_start(&self) -> Vec<String> {
        let task = self.start.lock().unwrap_or_else(|p| p.into_inner()).take();
        match task {
            Some(task) => task.await.unwrap_or_default(),
            None => Vec::new(),
        }
    }
}

/// What the hooks of one event decided together.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HookOutcome {
    /// A hook blocked (exit 2, a block or deny decision, or a `PreToolUse` hook that failed):
    /// the reasons, one line per hook.
    pub blocked: Option<String>,
    /// A hook allowed the call without asking (and none blocked or asked).
    pub allowed: bool,
    /// A hook asked for the user's approval: its reason.
    pub ask: Option<String>,
    /// Text for the model (plain stdout or `additionalContext`), one entry per hook.
    pub context: Vec<String>,
}

/// What `hooks/list` shows.
pub struct HookListing {
    pub hooks: Vec<Hook>,
    pub project_files: Vec<String>,
    pub trusted: bool,
}

/// Read the hook files and the stored trust. Blocking parts run on the blocking pool.
async fn load(conversation: &Conversation) -> HookSet {
    let workspace = conversation.workspace.clone();
    let (user, project, problems) = tokio::task::spawn_blocking(move || {
        let mut problems = Vec::new();
        let mut user = Vec::new();
        if let Some(path) = user_hooks_path() {
            let read = std::fs::File::open(&path).and_then(|file| {
                let mut text = String::new();
                std::io::Read::read_to_string(
                    &mut std::io::Read::take(file, hooks::MAX_HOOK_FILE_BYTES + 1),
                    &mut text,
                )?;
                if text.len() as u64 > hooks::MAX_HOOK_FILE_BYTES {
                    return Err(std::io::Error::other(format!(
                        "it is larger than {} bytes",
                        hooks::MAX_HOOK_FILE_BYTES
                    )));
                }
                Ok(text)
            });
            match read {
                Ok(text) => match hooks::parse(&text, HookSource::User) {
                    Ok(hooks) => user = hooks,
                    Err(why) => problems.push(format!(
                        "{} is not used: {why}; fix it and start a new session",
                        path.display()
                    )),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => problems.push(format!("{} cannot be read: {e}", path.display())),
            }
        }
        let mut project = ProjectHooks::default();
        for (index, root) in workspace.roots().iter().enumerate() {
            for file in hooks::PROJECT_HOOK_FILES {
                // Through the workspace: confined to the root, so a link cannot make tandem
                // read (and later run) hooks from elsewhere.
                let text = workspace
                    .resolve(&root.join(file).display().to_string())
                    .and_then(|path| {
                        workspace.read_text_if_exists_capped(&path, hooks::MAX_HOOK_FILE_BYTES)
                    });
                let name = if index == 0 {
                    file.to_owned()
                } else {
                    root.join(file).display().to_string()
                };
                match text {
                    Ok(Some(text)) => {
                        match hooks::parse(&text, HookSource::Project) {
                            Ok(hooks) => project.hooks.extend(hooks),
                            Err(why) => problems.push(format!(
                                "the project hooks of {name} are not used: {why}; fix the file and start a new session"
                            )),
                        }
                        project.files.push((name, text));
                    }
                    Ok(None) => {}
                    Err(e) => problems.push(format!("{name} cannot be read: {e}")),
                }
            }
        }
        // A file that declares no hooks (a Claude Code settings file with permissions only)
        // needs no trust.
        if project.hooks.is_empty() {
            project.files.clear();
        }
        (user, project, problems)
    })
    .await
    .unwrap_or_default();
    let trusted = match (&conversation.store, project.files.is_empty()) {
        (_, true) => true,
        (None, false) => false,
        (Some(store), false) => {
            let cwd = conversation.workspace.roots()[0].display().to_string();
            match store.trusted_hooks(&cwd).await {
                Ok(hash) => hash.as_deref() == Some(project.content_hash().as_str()),
                Err(e) => {
                    tracing::warn!("cannot read whether the hooks of {cwd} are trusted: {e}");
                    false
                }
            }
        }
    };
    HookSet::new(user, project, problems, trusted)
}

impl Conversation {
    /// The session's hooks (read on first use).
    pub async fn hook_set(&self) -> Arc<HookSet> {
        self.hooks
            .set
            .get_or_init(|| async { Arc::new(load(self).await) })
            .await
            .clone()
    }

    /// `hooks/list`.
    pub async fn hook_listing(&self) -> HookListing {
        let set = self.hook_set().await;
        HookListing {
            hooks: set.all().cloned().collect(),
            project_files: set.project.files.iter().map(|(p, _)| p.clone()).collect(),
            trusted: set.project_trusted(),
        }
    }

    /// `hooks/trust`: trust the project hooks as this session read them, remembered for the
    /// folder (bound to their content hash). Errors say why and what to do.
    pub async fn trust_hooks(&self) -> Result<(), String> {
        let set = self.hook_set().await;
        if set.project.files.is_empty() {
            return Err(format!(
                "this workspace has no project hooks to trust (they live in {})",
                hooks::PROJECT_HOOK_FILES.join(", ")
            ));
        }
        set.set_project_trusted();
        if let Some(store) = &self.store {
            let cwd = self.workspace.roots()[0].display().to_string();
            store
                .trust_hooks(&cwd, &set.project.content_hash(), super::history::now_ms())
                .await
                .map_err(|e| {
                    format!("the project hooks run in this session, but the store could not remember the trust ({e}); send hooks/trust again")
                })?;
        }
        Ok(())
    }

    /// Start the `SessionStart` hooks (`source`: `startup` or `resume`) in the background;
    /// the first turn waits for them and hands their context to the model.
    pub fn start_session_hooks(self: &Arc<Self>, source: &'static str) {
        let conversation = self.clone();
        let task = tokio::spawn(async move {
            let set = conversation.hook_set().await;
            for problem in &set.problems {
                conversation.emit(
                    None,
                    Event::Notice {
                        kind: NoticeKind::Warning,
                        text: problem.clone(),
                    },
                );
            }
            if !set.any(HookEvent::SessionStart, Some(source)) {
                return Vec::new();
            }
            let mut input = Map::new();
            input.insert("source".into(), Value::from(source));
            conversation
                .run_hooks(None, HookEvent::SessionStart, Some(source), input)
                .await
                .context
        });
        self.hooks.set_session_start(task);
    }

    /// The context the `SessionStart` hooks gave (once: the first turn takes it).
    pub async fn take_session_start_context(&self) -> Vec<String> {
        self.hooks.take_session_start().await
    }

    /// Run the hooks of `event` that match `subject`, in parallel, with `fields` added to the
    /// common input; announce each run and failure on `turn_id`, and fold the answers.
    pub async fn run_hooks(
        &self,
        turn_id: Option<&str>,
        event: HookEvent,
        subject: Option<&str>,
        fields: Map<String, Value>,
    ) -> HookOutcome {
        let set = self.hook_set().await;
        let matching: Vec<Hook> = set.matching(event, subject).into_iter().cloned().collect();
        if matching.is_empty() {
            return HookOutcome::default();
        }
        let root = self.workspace.roots()[0].clone();
        let mut input = Map::new();
        input.insert("session_id".into(), Value::from(self.id.as_str()));
        input.insert("cwd".into(), Value::from(root.display().to_string()));
        input.insert("hook_event_name".into(), Value::from(event.name()));
        input.extend(fields);
        let tool_call_id = input
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let input = Value::Object(input);
        let environment = HookEnvironment {
            removed: self
                .engine
                .config
                .providers
                .values()
                .filter_map(|p| p.api_key_env.clone())
                .collect(),
            set: vec![
                ("TANDEM_PROJECT_DIR".into(), root.display().to_string()),
                ("CLAUDE_PROJECT_DIR".into(), root.display().to_string()),
                ("TANDEM_SESSION_ID".into(), self.id.clone()),
            ],
        };
        let runs = futures_util::future::join_all(
            matching
                .iter()
                .map(|hook| hook_run::run(hook, &input, &root, &environment)),
        )
        .await;
        let mut outcome = HookOutcome::default();
        let mut blocks = Vec::new();
        let mut allowed = false;
        for (hook, run) in matching.iter().zip(runs) {
            let answer = hook_run::interpret(event, &run);
            let blocked = match &answer {
                HookAnswer::Block { .. } => true,
                HookAnswer::Failed { .. } => event == HookEvent::PreToolUse,
                _ => false,
            };
            self.emit(
                turn_id,
                Event::HookRan {
                    event: event.name().to_owned(),
                    command: hook.command.clone(),
                    exit_code: run.exit_code,
                    duration_ms: duration_ms(run.duration),
                    blocked,
                    tool_call_id: tool_call_id.clone(),
                },
            );
            match answer {
                HookAnswer::Proceed { context } => outcome.context.extend(context),
                HookAnswer::Block { reason } => blocks.push(format!(
                    "the {} hook `{}`: {reason}",
                    event.name(),
                    hook.command
                )),
                HookAnswer::Allow { .. } => allowed = true,
                HookAnswer::Ask { reason } => {
                    outcome.ask.get_or_insert(match reason {
                        Some(r) => {
                            format!("the {} hook `{}` asks: {r}", event.name(), hook.command)
                        }
                        None => format!(
                            "the {} hook `{}` asks for your approval",
                            event.name(),
                            hook.command
                        ),
                    });
                }
                HookAnswer::Failed { why } => {
                    let text = if event == HookEvent::PreToolUse {
                        let reason = format!(
                            "the PreToolUse hook `{}` failed ({why}), so the call is blocked: a hook that cannot answer does not let a tool run",
                            hook.command
                        );
                        blocks.push(reason.clone());
                        reason
                    } else {
                        format!(
                            "the {} hook `{}` failed: {why}; tandem went on without it",
                            event.name(),
                            hook.command
                        )
                    };
                    self.commit(Message::notice(NoticeKind::Warning, text.clone(), turn_id));
                    self.emit(
                        turn_id,
                        Event::Notice {
                            kind: NoticeKind::Warning,
                            text,
                        },
                    );
                }
            }
        }
        if !blocks.is_empty() {
            outcome.blocked = Some(blocks.join("\n"));
        } else if outcome.ask.is_none() {
            outcome.allowed = allowed;
        }
        outcome
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
