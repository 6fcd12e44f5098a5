-- tandem/_meta/protocol.lua: LuaCATS types of the tandem protocol messages the plugin reads (protocol.md is the reference); never loaded at run time.
---@meta

---@class tandem.ModelInfo A model of the catalog (initialize, models/list).
---@field id string what session/new and switchModel take
---@field provider string the config's provider entry
---@field name string the model id sent to the provider
---@field contextWindow integer tokens
---@field maxOutputTokens? integer
---@field vision boolean
---@field pdf boolean
---@field reasoning boolean
---@field parallelToolCalls boolean

---@class tandem.InitializeResult
---@field protocolVersion integer
---@field serverInfo { name: 'tandem', version: string }
---@field capabilities { sessionStore: boolean, framing: 'ndjson'|'contentLength', imagePrompts: boolean, documentPrompts: boolean, attach?: tandem.AttachCapability }
---@field models tandem.ModelInfo[]
---@field defaultModel string

---@class tandem.AttachCapability Where other clients attach; only when the server listens (--listen ws://…).
---@field url string `ws://HOST:PORT`
---@field tokenFile string the file (mode 0600) holding the token clients send (`Authorization: Bearer TOKEN` or `?token=`)

---@class tandem.SessionAttachParams
---@field sessionId string
---@field fromSeq? integer the last seq the client has (default 0: everything kept)

---@class tandem.ModelsListResult
---@field models tandem.ModelInfo[]
---@field defaultModel string

---@alias tandem.Mode 'ask'|'autoEdit'|'plan'|'fullAuto'
---@alias tandem.Decision 'once'|'alwaysTool'|'alwaysCommand'|'deny'
---@alias tandem.ToolStatus 'running'|'completed'|'failed'|'denied'|'interrupted'

---@class tandem.SessionNewResult
---@field sessionId string
---@field model string
---@field mode tandem.Mode

---@class tandem.SessionSummary An entry of session/list (most recently updated first).
---@field sessionId string
---@field cwd string the canonical workspace root
---@field title? string the first 80 characters of the first prompt
---@field model string
---@field updatedAt integer milliseconds since the epoch

---@class tandem.SessionLoadResult A page of session/load.
---@field sessionId string
---@field cwd string
---@field model string
---@field mode tandem.Mode
---@field state 'idle'|'running'
---@field networkAccess? boolean
---@field messages table[] the history page, oldest first
---@field pending? table[] approvalRequested and questionAsked events still open
---@field cursor? string present when older messages were left out
---@field plan? tandem.PlanEntry[] the model's current plan (update_plan); absent when it has none

---@class tandem.DiffEntry One file of a proposed or applied change.
---@field path string
---@field oldText? string nil (JSON null) for a new file
---@field newText string
---@field unified string

---@class tandem.Event The params of a session/event notification.
---@field sessionId string
---@field seq integer
---@field turnId? string
---@field type string one of the event types below

---@class tandem.AssistantDelta: tandem.Event
---@field text string

---@class tandem.ToolCall: tandem.Event
---@field toolCallId string
---@field name string
---@field kind 'read'|'search'|'edit'|'delete'|'move'|'execute'|'think'|'fetch'|'other'
---@field title string
---@field arguments any
---@field locations? { path: string, line?: integer }[]
---@field mcp? tandem.McpTool for a tool of an MCP server (`name` is then `mcp__<server>__<tool>`)

---@class tandem.ApprovalOption
---@field decision tandem.Decision
---@field label string
---@field commandPrefix? string

---@class tandem.ApprovalRequested: tandem.Event
---@field requestId string
---@field toolCallId string
---@field name string
---@field kind string
---@field title string
---@field reason string ends with "too large to show in full" for a cut proposal
---@field arguments any
---@field diff? tandem.DiffEntry[]
---@field command? string
---@field cwd? string
---@field mcp? tandem.McpTool for a tool of an MCP server: show the server, the tool and the arguments
---@field options tandem.ApprovalOption[]
---@field argumentsDigest string

---@class tandem.ApprovalResolved: tandem.Event
---@field requestId string
---@field decision tandem.Decision

---@class tandem.QuestionAsked: tandem.Event
---@field requestId string
---@field toolCallId string
---@field question string
---@field choices? string[]
---@field plan? string

---@class tandem.ToolCallUpdate: tandem.Event
---@field toolCallId string
---@field status tandem.ToolStatus
---@field output? string a chunk of shell output, with running
---@field result? string the tool result, with a final status
---@field diff? tandem.DiffEntry[] the change written, with completed (write_file, edit_file)

---@alias tandem.PlanStatus 'pending'|'in_progress'|'completed'

---@class tandem.PlanEntry A step of the model's plan (update_plan).
---@field content string
---@field status tandem.PlanStatus

---@class tandem.PlanEvent: tandem.Event The model's plan changed: the whole plan, in order; empty means no plan.
---@field entries tandem.PlanEntry[]

---@class tandem.Notice: tandem.Event
---@field kind 'interrupted'|'error'|'retrying'|'warning'|'network' (history adds 'model_switch', 'compacted', 'rewound')
---@field text string

---@class tandem.Usage: tandem.Event
---@field model string
---@field inputTokens integer
---@field outputTokens integer
---@field cachedTokens? integer

---@class tandem.TurnEnded: tandem.Event
---@field reason 'completed'|'interrupted'|'error'|'maxIterations'|'contextExceeded'
---@field error? { message: string, retriable: boolean }

---@alias tandem.McpSource 'config'|'session'|'workspace' tandem's config file, session/new's mcpServers, the folder's .mcp.json
---@alias tandem.McpServerStatus 'starting'|'ready'|'failed'|'exited'|'untrusted'

---@class tandem.McpTool The `mcp` field of toolCall and approvalRequested.
---@field server string the MCP server's name
---@field tool string the tool's own name on that server

---@class tandem.McpServer An entry of mcp/status (and of the plugin's list, kept from mcpStatus events).
---@field name string
---@field source? tandem.McpSource nil in the plugin's list until mcp/status has named it
---@field status tandem.McpServerStatus
---@field tools string[] model-facing names (`mcp__<server>__<tool>`) while ready
---@field error? string why it failed, exited or waits for trust, with its stderr's end and the next step

---@class tandem.McpStatusResult The result of mcp/status.
---@field servers tandem.McpServer[] in definition order

---@class tandem.McpTrustParams The params of mcp/trust (its result is {}).
---@field sessionId string
---@field server string the name of a server of the workspace's .mcp.json

---@class tandem.McpStatusEvent: tandem.Event An mcpStatus event (no turnId).
---@field server string
---@field status tandem.McpServerStatus
---@field tools? string[] model-facing names, when ready
---@field error? string

---@alias tandem.FileChange 'added'|'modified'|'deleted'
---@alias tandem.RestoreScope 'files'|'conversation'|'both'

---@class tandem.TurnFileDiff A path of turn/diff's `files`, in the order the turn first touched it.
---@field path string
---@field change tandem.FileChange
---@field oldText? string nil for an added path, a folder, binary or not captured content
---@field newText? string nil for a deleted path, a folder, binary or not captured content
---@field unified string a unified diff, empty when a side is not text
---@field binary? boolean
---@field notCaptured? string why the content before the turn was not captured

---@class tandem.TurnDiffResult
---@field files tandem.TurnFileDiff[]

---@class tandem.Checkpoint A turn of session/checkpoints (oldest first) as a rewind point.
---@field turnId string
---@field prompt string the text of the turn's prompt (with any attached file's text)
---@field createdAt integer milliseconds since the epoch
---@field files { path: string, change: tandem.FileChange }[] empty for a turn that changed nothing
---@field filesRestored? boolean a `files` rewind put its changes back

---@class tandem.CheckpointsResult
---@field checkpoints tandem.Checkpoint[]

---@class tandem.RewindParams
---@field sessionId string
---@field turnId string
---@field restore tandem.RestoreScope
---@field force? boolean put back paths changed since by someone else too

---@class tandem.RewindResult
---@field restored string[] paths put back
---@field conflicts { path: string, reason: string }[] paths left alone (without force)
---@field conversationRewound boolean

---@class tandem.ForkResult session/fork's answer: the new session (open it with session/load).
---@field sessionId string

---@class tandem.Rewound: tandem.Event session/rewind put the session back to before `turnId`.
---@field restore tandem.RestoreScope
---@field files string[] the paths it restored

---@alias tandem.CommandSource 'builtin'|'project'|'user' built into the server, a Markdown file of the workspace (.tandem/commands, .claude/commands) or of ~/.config/tandem/commands

---@class tandem.SlashCommand An entry of commands/list (sorted by name).
---@field name string without the leading slash
---@field description string
---@field argumentHint? string what the command takes, e.g. `FILE`, `NAME`
---@field source tandem.CommandSource

---@class tandem.CommandsListResult The result of commands/list (params `{sessionId}`).
---@field commands tandem.SlashCommand[]

---@class tandem.CommandResult The `command` of a prompt answer: the slash command the prompt ran.
---@field name string
---@field output? string Markdown to show in the chat (a built-in that ran at once: no `turnId`)
---@field sessionId? string the new session of /fork

---@class tandem.PromptResult The result of prompt.
---@field turnId? string absent when a built-in ran at once (then `command.output` says what it did)
---@field command? tandem.CommandResult present when the text started with `/name` of a listed command

---@alias tandem.HookSource 'project'|'user'|'config'|string

---@class tandem.Hook An entry of hooks/list.
---@field event string PreToolUse, PostToolUse, UserPromptSubmit, Stop, …
---@field matcher? string the tools it applies to; absent when it matches everything
---@field command string
---@field timeout? integer seconds
---@field source tandem.HookSource `project` hooks run only once trusted

---@class tandem.HooksListResult The result of hooks/list (params `{sessionId}`).
---@field hooks tandem.Hook[]
---@field projectFiles string[] the workspace's hook files (relative paths)
---@field trusted boolean false when project hook files exist whose current content is not trusted

---@class tandem.HooksTrustParams The params of hooks/trust (its result is {}; invalidParams without project hooks).
---@field sessionId string

---@class tandem.HookRan: tandem.Event A hook ran.
---@field event string the hook event (PreToolUse, …)
---@field command string
---@field exitCode? integer nil (JSON null) when it could not run, timed out or was killed by a signal
---@field durationMs integer
---@field blocked boolean it blocked what it guards (exit code 2); a failure otherwise also sends a `warning` notice

---@class tandem.RpcError A JSON-RPC error object.
---@field code integer
---@field message string
---@field data? { kind: string }
