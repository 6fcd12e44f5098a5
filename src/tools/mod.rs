//! Built-in tools: their metadata (risk, kind, schema), argument parsing, and execution.
//!
//! Tools never touch the store or the transport. A tool failure is a tool result for the model
//! (`is_error`), never a failed turn. File tools are synchronous and run on the blocking pool;
//! the shell tool is async because it streams output and must be killable.

pub mod cgroup;
pub mod client_fs;
pub mod fs;
pub mod landlock;
pub mod process_tree;
pub mod sandbox;
pub mod shell;
pub mod skills;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::protocol::{Location, ToolKind};
use crate::workspace::Workspace;

/// How dangerous a tool is; this drives both scheduling and permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    /// Reads only: runs without asking, and contiguous runs of them execute concurrently.
    Low,
    /// Changes files: needs approval in `ask` mode, hidden in `plan` mode.
    Edit,
    /// Runs programs: needs approval unless `fullAuto` or a rule allows it.
    Execute,
    /// Asks the user; the answer is the consent.
    Interactive,
    /// Runs in another program (an MCP server's tool) that tandem cannot confine or inspect:
    /// needs approval unless `fullAuto` or a rule allows it, hidden in `plan` mode, and marked
    /// as a side effect before it runs (a crash never repeats it).
    External,
}

#[derive(Debug)]
pub struct ToolMeta {
    pub name: &'static str,
    pub risk: Risk,
    pub kind: ToolKind,
    pub description: &'static str,
    parameters: fn() -> Value,
}

impl ToolMeta {
    /// The JSON Schema of the arguments object (the engine puts it in each provider request).
    pub fn parameters(&self) -> Value {
        (self.parameters)()
    }
}

fn read_file_schema() -> Value {
    json!({"type":"object","properties":{
        "path":{"type":"string","description":"File path, relative to the workspace root or absolute inside it"},
        "offset":{"type":"integer","description":"1-based line to start at"},
        "limit":{"type":"integer","description":"Maximum number of lines to return"}},
        "required":["path"],"additionalProperties":false})
}
fn list_dir_schema() -> Value {
    json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false})
}
fn glob_schema() -> Value {
    json!({"type":"object","properties":{
        "pattern":{"type":"string","description":"Glob such as src/**/*.rs"},
        "path":{"type":"string","description":"Directory to search in (default: the workspace root)"}},
        "required":["pattern"],"additionalProperties":false})
}
fn grep_schema() -> Value {
    json!({"type":"object","properties":{
        "pattern":{"type":"string","description":"Regular expression (Rust regex syntax)"},
        "path":{"type":"string","description":"Directory or file to search (default: the workspace root)"},
        "glob":{"type":"string","description":"Only search files matching this glob"}},
        "required":["pattern"],"additionalProperties":false})
}
fn write_file_schema() -> Value {
    json!({"type":"object","properties":{
        "path":{"type":"string"},"content":{"type":"string","description":"The whole new content of the file"}},
        "required":["path","content"],"additionalProperties":false})
}
fn edit_file_schema() -> Value {
    json!({"type":"object","properties":{
        "path":{"type":"string"},
        "old_string":{"type":"string","description":"Exact text to replace; must be unique unless replace_all"},
        "new_string":{"type":"string"},
        "replace_all":{"type":"boolean"}},
        "required":["path","old_string","new_string"],"additionalProperties":false})
}
fn shell_schema() -> Value {
    json!({"type":"object","properties":{
        "command":{"type":"string","description":"A bash command line, run in the workspace root"},
        "timeout_ms":{"type":"integer","description":"Kill the command after this many milliseconds (default 120000)"}},
        "required":["command"],"additionalProperties":false})
}
fn ask_user_schema() -> Value {
    json!({"type":"object","properties":{
        "question":{"type":"string"},"choices":{"type":"array","items":{"type":"string"}}},
        "required":["question"],"additionalProperties":false})
}
fn propose_plan_schema() -> Value {
    json!({"type":"object","properties":{"plan":{"type":"string","description":"The plan in Markdown"}},
        "required":["plan"],"additionalProperties":false})
}

fn update_plan_schema() -> Value {
    json!({"type":"object","properties":{"entries":{"type":"array","description":"The whole plan, in order (it replaces the previous one)","items":{"type":"object","properties":{
        "content":{"type":"string","description":"One step, in a short sentence"},
        "status":{"type":"string","enum":["pending","in_progress","completed"]}},
        "required":["content","status"],"additionalProperties":false}}},
        "required":["entries"],"additionalProperties":false})
}

fn skill_schema() -> Value {
    json!({"type":"object","properties":{
        "name":{"type":"string","description":"The skill's name, as the system prompt lists it"},
        "file":{"type":"string","description":"One of the skill's files to read instead of its instructions"}},
        "required":["name"],"additionalProperties":false})
}

/// The most entries a plan holds, and the longest entry (characters): a plan is a checklist an
/// editor shows, not a place for documents.
pub const MAX_PLAN_ENTRIES: usize = 64;
pub const MAX_PLAN_ENTRY_CHARS: usize = 2_000;

/// The built-in tools, in the order they are offered to the model.
pub static TOOLS: &[ToolMeta] = &[
    ToolMeta {
        name: "read_file",
        risk: Risk::Low,
        kind: ToolKind::Read,
        description: "Read a text file from the workspace. Lines are numbered. Use offset/limit for large files.",
        parameters: read_file_schema,
    },
    ToolMeta {
        name: "list_dir",
        risk: Risk::Low,
        kind: ToolKind::Read,
        description: "List the entries of a directory in the workspace; directories end with '/'.",
        parameters: list_dir_schema,
    },
    ToolMeta {
        name: "glob",
        risk: Risk::Low,
        kind: ToolKind::Search,
        description: "Find files whose path matches a glob pattern. Honours .gitignore.",
        parameters: glob_schema,
    },
    ToolMeta {
        name: "grep",
        risk: Risk::Low,
        kind: ToolKind::Search,
        description: "Search file contents with a regular expression. Honours .gitignore. Prints path:line:text.",
        parameters: grep_schema,
    },
    ToolMeta {
        name: "write_file",
        risk: Risk::Edit,
        kind: ToolKind::Edit,
        description: "Create or overwrite a file with the given content. The user reviews a diff first.",
        parameters: write_file_schema,
    },
    ToolMeta {
        name: "edit_file",
        risk: Risk::Edit,
        kind: ToolKind::Edit,
        description: "Replace an exact, unique string in a file (or every occurrence with replace_all). The user reviews a diff first.",
        parameters: edit_file_schema,
    },
    ToolMeta {
        name: "shell",
        risk: Risk::Execute,
        kind: ToolKind::Execute,
        description: "Run a bash command in the workspace root and return its exit code and output.",
        parameters: shell_schema,
    },
    ToolMeta {
        name: "ask_user",
        risk: Risk::Interactive,
        kind: ToolKind::Other,
        description: "Ask the user a question (optionally with choices) and wait for the answer.",
        parameters: ask_user_schema,
    },
    ToolMeta {
        name: "skill",
        risk: Risk::Low,
        kind: ToolKind::Read,
        description: "Load a skill listed in the system prompt: its instructions and the list of its files; with `file`, one of those files.",
        parameters: skill_schema,
    },
    ToolMeta {
        name: "update_plan",
        risk: Risk::Low,
        kind: ToolKind::Think,
        description: "Keep a short checklist of the steps of a multi-step task and mark each one in_progress or completed as you go; send the whole list each time. The user sees it beside the chat.",
        parameters: update_plan_schema,
    },
    ToolMeta {
        name: "propose_plan",
        risk: Risk::Interactive,
        kind: ToolKind::Think,
        description: "Show the user a plan in Markdown and wait for them to accept, reject or comment.",
        parameters: propose_plan_schema,
    },
];

pub fn meta_for(name: &str) -> Option<&'static ToolMeta> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Parsed, typed arguments of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArgs {
    ReadFile {
        path: String,
        offset: Option<u64>,
        limit: Option<u64>,
    },
    ListDir {
        path: String,
    },
    Glob {
        pattern: String,
        path: Option<String>,
    },
    Grep {
        pattern: String,
        path: Option<String>,
        glob: Option<String>,
    },
    WriteFile {
        path: String,
        content: String,
    },
    EditFile {
        path: String,
        old_string: String,
        new_string: String,
        replace_all: bool,
    },
    Shell {
        command: String,
        timeout_ms: Option<u64>,
    },
    AskUser {
        question: String,
        choices: Option<Vec<String>>,
    },
    ProposePlan {
        plan: String,
    },
    /// Load a skill's instructions, or one of its files.
    Skill {
        name: String,
        file: Option<String>,
    },
    /// The model's checklist for the task (replaces the previous one).
    UpdatePlan {
        entries: Vec<crate::protocol::PlanEntry>,
    },
    /// A tool of an MCP server (never parsed by [`parse_args`]: the engine builds it from the
    /// session's MCP tools, whose arguments are whatever JSON the server's schema asks for).
    Mcp {
        server: String,
        tool: String,
        arguments: Value,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillArgs {
    name: String,
    #[serde(default)]
    file: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdatePlanArgs {
    entries: Vec<crate::protocol::PlanEntry>,
}

#[derive(Deserialize)]
struct ReadFileArgs {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}
#[derive(Deserialize)]
struct PathArgs {
    path: String,
}
#[derive(Deserialize)]
struct GlobArgs {
    pattern: String,
    path: Option<String>,
}
#[derive(Deserialize)]
struct GrepArgs {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}
#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}
#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}
#[derive(Deserialize)]
struct ShellArgs {
    command: String,
    timeout_ms: Option<u64>,
}
#[derive(Deserialize)]
struct AskArgs {
    question: String,
    choices: Option<Vec<String>>,
}
#[derive(Deserialize)]
struct PlanArgs {
    plan: String,
}

/// Parse the model's JSON arguments for `name`. The error is written for the model to fix its call.
pub fn parse_args(name: &str, arguments: &Value) -> Result<ToolArgs, String> {
    fn de<T: serde::de::DeserializeOwned>(name: &str, v: &Value) -> Result<T, String> {
        serde_json::from_value(v.clone()).map_err(|e| {
            format!("invalid arguments for {name}: {e}; call it again with arguments matching its schema")
        })
    }
    Ok(match name {
        "read_file" => {
            let a: ReadFileArgs = de(name, arguments)?;
            ToolArgs::ReadFile {
                path: a.path,
                offset: a.offset,
                limit: a.limit,
            }
        }
        "list_dir" => ToolArgs::ListDir {
            path: de::<PathArgs>(name, arguments)?.path,
        },
        "glob" => {
            let a: GlobArgs = de(name, arguments)?;
            ToolArgs::Glob {
                pattern: a.pattern,
                path: a.path,
            }
        }
        "grep" => {
            let a: GrepArgs = de(name, arguments)?;
            ToolArgs::Grep {
                pattern: a.pattern,
                path: a.path,
                glob: a.glob,
            }
        }
        "write_file" => {
            let a: WriteArgs = de(name, arguments)?;
            ToolArgs::WriteFile {
                path: a.path,
                content: a.content,
            }
        }
        "edit_file" => {
            let a: EditArgs = de(name, arguments)?;
            ToolArgs::EditFile {
                path: a.path,
                old_string: a.old_string,
                new_string: a.new_string,
                replace_all: a.replace_all,
            }
        }
        "shell" => {
            let a: ShellArgs = de(name, arguments)?;
            ToolArgs::Shell {
                command: a.command,
                timeout_ms: a.timeout_ms,
            }
        }
        "ask_user" => {
            let a: AskArgs = de(name, arguments)?;
            ToolArgs::AskUser {
                question: a.question,
                choices: a.choices,
            }
        }
        "propose_plan" => ToolArgs::ProposePlan {
            plan: de::<PlanArgs>(name, arguments)?.plan,
        },
        "skill" => {
            let a: SkillArgs = de(name, arguments)?;
            ToolArgs::Skill {
                name: a.name,
                file: a.file,
            }
        }
        "update_plan" => {
            let a: UpdatePlanArgs = de(name, arguments)?;
            if a.entries.len() > MAX_PLAN_ENTRIES {
                return Err(format!(
                    "invalid arguments for update_plan: {} entries, at most {MAX_PLAN_ENTRIES}; keep the plan to its main steps",
                    a.entries.len()
                ));
            }
            if let Some(long) = a
                .entries
                .iter()
                .position(|e| e.content.chars().count() > MAX_PLAN_ENTRY_CHARS)
            {
                return Err(format!(
                    "invalid arguments for update_plan: entry {} is longer than {MAX_PLAN_ENTRY_CHARS} characters; say each step in a short sentence",
                    long + 1
                ));
            }
            ToolArgs::UpdatePlan { entries: a.entries }
        }
        other => {
            let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
            return Err(format!(
                "unknown tool {other}; the available tools are: {}",
                names.join(", ")
            ));
        }
    })
}

fn short(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > max || text.contains('\n') {
        let cut: String = line.chars().take(max).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

impl ToolArgs {
    /// A one-line human title for the call, shown in tool cards and approvals.
    pub fn title(&self) -> String {
        match self {
            ToolArgs::ReadFile { path, .. } => format!("Read {path}"),
            ToolArgs::ListDir { path } => format!("List {path}"),
            ToolArgs::Glob { pattern, .. } => format!("Find files matching {pattern}"),
            ToolArgs::Grep { pattern, .. } => format!("Search for {}", short(pattern, 60)),
            ToolArgs::WriteFile { path, .. } => format!("Write {path}"),
            ToolArgs::EditFile { path, .. } => format!("Edit {path}"),
            ToolArgs::Shell { command, .. } => format!("Run `{}`", short(command, 80)),
            ToolArgs::AskUser { question, .. } => format!("Ask: {}", short(question, 80)),
            ToolArgs::ProposePlan { .. } => "Propose a plan".to_owned(),
            ToolArgs::UpdatePlan { entries } => {
                format!("Update the plan ({} steps)", entries.len())
            }
            ToolArgs::Skill { name, file: None } => format!("Load skill {name}"),
            ToolArgs::Skill {
                name,
                file: Some(file),
            } => format!("Read {file} of skill {name}"),
            // The server first: an editor (and ACP's title) shows which program runs it.
            ToolArgs::Mcp { server, tool, .. } => format!("{server}: {tool}"),
        }
    }

    /// The files a call touches, as absolute paths, for editors to follow along.
    pub fn locations(&self, workspace: &Workspace) -> Option<Vec<Location>> {
        let path = match self {
            ToolArgs::ReadFile { path, .. }
            | ToolArgs::WriteFile { path, .. }
            | ToolArgs::EditFile { path, .. }
            | ToolArgs::ListDir { path } => path,
            _ => return None,
        };
        let resolved = workspace.resolve(path).ok()?;
        let line = match self {
            // `offset` is 1-based; a model that sends 0 means the start (ACP lines are 1-based too).
            ToolArgs::ReadFile { offset, .. } => offset.map(|o| o.max(1)),
            _ => None,
        };
        Some(vec![Location {
            path: workspace.absolute(&resolved).display().to_string(),
            line,
        }])
    }

    pub fn command(&self) -> Option<&str> {
        match self {
            ToolArgs::Shell { command, .. } => Some(command),
            _ => None,
        }
    }

    /// The MCP server and tool of a call to an MCP tool.
    pub fn mcp_ref(&self) -> Option<crate::protocol::McpToolRef> {
        match self {
            ToolArgs::Mcp { server, tool, .. } => Some(crate::protocol::McpToolRef {
                server: server.clone(),
                tool: tool.clone(),
            }),
            _ => None,
        }
    }
}

/// Run a low-risk (read-only) tool on the blocking pool.
pub async fn run_read_only(workspace: Workspace, args: ToolArgs) -> fs::ToolOutcome {
    let joined = tokio::task::spawn_blocking(move || match args {
        ToolArgs::ReadFile {
            path,
            offset,
            limit,
        } => fs::read_file(&workspace, &path, offset, limit),
        ToolArgs::ListDir { path } => fs::list_dir(&workspace, &path),
        ToolArgs::Glob { pattern, path } => fs::glob(&workspace, &pattern, path.as_deref()),
        ToolArgs::Grep {
            pattern,
            path,
            glob,
        } => fs::grep(&workspace, &pattern, path.as_deref(), glob.as_deref()),
        ToolArgs::Skill { name, file } => {
            match skills::run(
                &skills::skill_folders(workspace.roots()),
                &name,
                file.as_deref(),
            ) {
                Ok(output) => fs::ToolOutcome {
                    output,
                    is_error: false,
                },
                Err(output) => fs::ToolOutcome {
                    output,
                    is_error: true,
                },
            }
        }
        other => fs::ToolOutcome {
            output: format!("internal error: {} is not a read-only tool", other.title()),
            is_error: true,
        },
    })
    .await;
    joined.unwrap_or_else(|e| fs::ToolOutcome {
        output: format!("the tool crashed: {e}"),
        is_error: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_parses() {
        for tool in TOOLS {
            assert_eq!(tool.parameters()["type"], "object", "{}", tool.name);
        }
        assert_eq!(
            parse_args("read_file", &json!({"path":"a"})).unwrap(),
            ToolArgs::ReadFile {
                path: "a".into(),
                offset: None,
                limit: None
            }
        );
        let err = parse_args("read_file", &json!({"nope":1})).unwrap_err();
        assert!(err.contains("invalid arguments for read_file"), "{err}");
        let err = parse_args("rm_rf", &json!({})).unwrap_err();
        assert!(err.contains("unknown tool rm_rf"), "{err}");
    }

    #[test]
    fn titles() {
        let a = parse_args("shell", &json!({"command":"cargo test\nmore"})).unwrap();
        assert_eq!(a.title(), "Run `cargo test…`");
    }
}
