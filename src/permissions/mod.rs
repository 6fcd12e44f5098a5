//! Permission modes, remembered rules, and the verdict for one tool call.
//!
//! The default is deny: a call that is not low-risk needs an explicit approval unless the mode or
//! a rule the user created allows it, and an approval nobody can answer resolves to deny. This
//! module only decides; asking the user and executing are the engine's job.

use crate::protocol::Mode;
use crate::tools::{Risk, ToolMeta};

/// Rules the user created by answering an approval: `alwaysTool` and `alwaysCommand` allow,
/// an ACP client's `reject_always` denies. Deny rules win over allow rules and over every mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PermissionRules {
    /// Tool names always allowed.
    pub tools: Vec<String>,
    /// Shell command prefixes always allowed (for example `cargo test`).
    pub command_prefixes: Vec<String>,
    /// Tool names always refused.
    pub denied_tools: Vec<String>,
    /// Shell command prefixes always refused, wherever they start a command of a chain.
    pub denied_command_prefixes: Vec<String>,
}

/// What a rule does, and its name in the store (`rules.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    AllowTool,
    AllowCommandPrefix,
    DenyTool,
    DenyCommandPrefix,
}

impl RuleKind {
    pub const ALL: [RuleKind; 4] = [
        RuleKind::AllowTool,
        RuleKind::AllowCommandPrefix,
        RuleKind::DenyTool,
        RuleKind::DenyCommandPrefix,
    ];

    /// The stored name. The allow names predate the deny rules; migration 5 renamed the ACP
    /// face's old `acpDeny*` rows to the deny names.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::AllowTool => "tool",
            RuleKind::AllowCommandPrefix => "commandPrefix",
            RuleKind::DenyTool => "denyTool",
            RuleKind::DenyCommandPrefix => "denyCommandPrefix",
        }
    }
}

impl std::fmt::Display for RuleKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored rule kind that this version does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission rule kind `{0}`")]
pub struct UnknownRuleKind(pub String);

impl std::str::FromStr for RuleKind {
    type Err = UnknownRuleKind;

    fn from_str(text: &str) -> Result<RuleKind, UnknownRuleKind> {
        RuleKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| UnknownRuleKind(text.to_owned()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run without asking.
    Allow,
    /// Ask the user; the reason is shown in the approval.
    Ask { reason: String },
    /// Never run; the reason becomes the tool's error result.
    Refuse { reason: String },
}

/// Characters that let one shell command line run more than one program. A command containing
/// any of them is never matched by a prefix rule, so `cargo test && curl …` is not allowed by an
/// `alwaysCommand` rule for `cargo test`.
const SHELL_CHAINING: &[char] = &[';', '&', '|', '`', '$', '<', '>', '(', ')', '\n', '\r'];

/// Whether a prefix rule covers this command: a whole-word prefix of a single simple command.
pub fn prefix_allows(prefix: &str, command: &str) -> bool {
    let command = command.trim();
    if prefix.is_empty() || command.contains(SHELL_CHAINING) {
        return false;
    }
    let prefix_words: Vec<&str> = prefix.split_whitespace().collect();
    let command_words: Vec<&str> = command.split_whitespace().collect();
    command_words.len() >= prefix_words.len()
        && prefix_words.iter().zip(&command_words).all(|(p, c)| p == c)
}

/// Whether a deny rule covers this command: any simple command of it (the parts between
/// chaining characters, so `echo hi && cargo publish` is covered by `cargo publish`) starts with
/// the prefix's words. Broader than [`prefix_allows`] on purpose: a deny fails closed.
pub fn prefix_denies(prefix: &str, command: &str) -> bool {
    let prefix_words: Vec<&str> = prefix.split_whitespace().collect();
    if prefix_words.is_empty() {
        return false;
    }
    command.split(SHELL_CHAINING).any(|part| {
        let words: Vec<&str> = part.split_whitespace().collect();
        words.len() >= prefix_words.len() && prefix_words.iter().zip(&words).all(|(p, w)| p == w)
    })
}

/// The prefix an `alwaysCommand` approval would remember: the program and, for the common
/// multi-command tools, its subcommand (`cargo test`, `git status`, `npm run`).
pub fn suggested_prefix(command: &str) -> String {
    let first_line = command.lines().next().unwrap_or_default();
    let simple = first_line
        .split(SHELL_CHAINING)
        .next()
        .unwrap_or_default()
        .trim();
    let words: Vec<&str> = simple.split_whitespace().collect();
    match words.as_slice() {
        [] => String::new(),
        [program] => (*program).to_owned(),
        [program, sub, ..] if !sub.starts_with('-') => format!("{program} {sub}"),
        [program, ..] => (*program).to_owned(),
    }
}

impl PermissionRules {
    /// Add a rule; false when the session has it already (it is not added twice).
    pub fn add(&mut self, kind: RuleKind, value: String) -> bool {
        let list = match kind {
            RuleKind::AllowTool => &mut self.tools,
            RuleKind::AllowCommandPrefix => &mut self.command_prefixes,
            RuleKind::DenyTool => &mut self.denied_tools,
            RuleKind::DenyCommandPrefix => &mut self.denied_command_prefixes,
        };
        if list.contains(&value) {
            return false;
        }
        list.push(value);
        true
    }

    /// Why a deny rule refuses this call, for the model, or `None`.
    pub fn refusal(&self, tool: &str, command: Option<&str>) -> Option<String> {
        if let Some(command) = command {
            if let Some(prefix) = self
                .denied_command_prefixes
                .iter()
                .find(|p| prefix_denies(p, command))
            {
                return Some(format!(
                    "the user chose to always reject commands starting with `{prefix}` in this session; do not run it, find another way or ask the user"
                ));
            }
        }
        self.denied_tools.iter().any(|t| t == tool).then(|| {
            format!("the user chose to always reject {tool} in this session; do not call it again, describe the change instead")
        })
    }

    pub fn allows(&self, tool: &str, command: Option<&str>) -> bool {
        if self.tools.iter().any(|t| t == tool) {
            return true;
        }
        match command {
            Some(command) => self
                .command_prefixes
                .iter()
                .any(|p| prefix_allows(p, command)),
            None => false,
        }
    }
}

/// Decide what to do with one call of `meta` in `mode`.
///
/// `command` is the shell command for `shell` calls, so prefix rules can match.
pub fn evaluate(
    mode: Mode,
    rules: &PermissionRules,
    meta: &ToolMeta,
    command: Option<&str>,
) -> Verdict {
    evaluate_call(mode, rules, meta.name, meta.risk, command)
}

/// [`evaluate`] for any tool, built-in or an MCP server's: its model-facing `name` and `risk`.
pub fn evaluate_call(
    mode: Mode,
    rules: &PermissionRules,
    name: &str,
    risk: Risk,
    command: Option<&str>,
) -> Verdict {
    if let Some(reason) = rules.refusal(name, command) {
        return Verdict::Refuse { reason };
    }
    match risk {
        Risk::Low | Risk::Interactive => Verdict::Allow,
        Risk::Edit => match mode {
            Mode::Plan => Verdict::Refuse {
                reason: format!(
                    "{} is not available in plan mode: edits are disabled; describe the change with propose_plan instead",
                    name
                ),
            },
            Mode::AutoEdit | Mode::FullAuto => Verdict::Allow,
            Mode::Ask if rules.allows(name, None) => Verdict::Allow,
            Mode::Ask => Verdict::Ask {
                reason: format!("{} changes a file in the workspace", name),
            },
        },
        Risk::Execute => match mode {
            Mode::Plan => Verdict::Refuse {
                reason: format!(
                    "{} is not available in plan mode: commands are disabled; describe what you would run with propose_plan instead",
                    name
                ),
            },
            Mode::FullAuto => Verdict::Allow,
            Mode::Ask | Mode::AutoEdit if rules.allows(name, command) => Verdict::Allow,
            Mode::Ask | Mode::AutoEdit => Verdict::Ask {
                reason: "shell commands can change anything the user can; review the command"
                    .to_owned(),
            },
        },
        Risk::External => match mode {
            Mode::Plan => Verdict::Refuse {
                reason: format!(
                    "{} is not available in plan mode: it is an MCP tool that may change things; use read-only tools and present a plan with propose_plan",
                    name
                ),
            },
            Mode::FullAuto => Verdict::Allow,
            Mode::Ask | Mode::AutoEdit if rules.allows(name, None) => Verdict::Allow,
            Mode::Ask | Mode::AutoEdit => Verdict::Ask {
                reason: "an MCP server runs this tool outside tandem's sandbox, and its description and annotations are the server's word; review the arguments".to_owned(),
            },
        },
    }
}

/// Whether a tool is offered to the model at all in `mode`. Plan mode hides edits and shell.
pub fn offered(mode: Mode, meta: &ToolMeta) -> bool {
    offered_risk(mode, meta.risk)
}

/// Whether a tool of `risk` is offered in `mode`: plan mode offers reads (and, of MCP tools,
/// only the low-risk ones).
pub fn offered_risk(mode: Mode, risk: Risk) -> bool {
    !(mode == Mode::Plan && matches!(risk, Risk::Edit | Risk::Execute | Risk::External))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::meta_for;

    #[test]
    fn prefix_rule_matches_whole_words_only() {
        assert!(prefix_allows("cargo test", "cargo test --all"));
        assert!(prefix_allows("cargo test", "cargo   test"));
        assert!(!prefix_allows("cargo test", "cargo testify"));
        assert!(!prefix_allows("cargo test", "cargo build"));
    }

    #[test]
    fn prefix_rule_never_covers_chained_commands() {
        assert!(!prefix_allows("cargo test", "cargo test && curl http://x"));
        assert!(!prefix_allows("cargo test", "cargo test; rm -rf /"));
        assert!(!prefix_allows("cargo test", "cargo test $(curl x)"));
        assert!(!prefix_allows("cargo test", "cargo test > /etc/passwd"));
    }

    #[test]
    fn a_deny_prefix_covers_any_command_of_a_chain_and_wins_over_every_mode() {
        assert!(prefix_denies("cargo publish", "cargo publish --dry-run"));
        assert!(prefix_denies("cargo publish", "echo hi && cargo publish"));
        assert!(prefix_denies("cargo publish", "true;cargo   publish"));
        assert!(!prefix_denies("cargo publish", "cargo publisher"));
        assert!(!prefix_denies("", "anything"));
        let mut rules = PermissionRules::default();
        rules.add(RuleKind::AllowCommandPrefix, "cargo publish".to_owned());
        rules.add(RuleKind::DenyCommandPrefix, "cargo publish".to_owned());
        assert!(rules.add(RuleKind::DenyTool, "edit_file".to_owned()));
        assert!(!rules.add(RuleKind::DenyTool, "edit_file".to_owned()));
        assert_eq!(rules.denied_tools, ["edit_file"], "added once");
        let shell = meta_for("shell").unwrap();
        let edit = meta_for("edit_file").unwrap();
        for mode in Mode::ALL {
            assert!(matches!(
                evaluate(mode, &rules, shell, Some("ls && cargo publish")),
                Verdict::Refuse { reason } if reason.contains("`cargo publish`")
            ));
            assert!(matches!(
                evaluate(mode, &rules, edit, None),
                Verdict::Refuse { reason } if reason.contains("always reject edit_file")
            ));
        }
        assert_eq!(
            evaluate(Mode::FullAuto, &rules, shell, Some("cargo build")),
            Verdict::Allow
        );
    }

    #[test]
    fn rule_kinds_round_trip_through_their_stored_names() {
        for kind in RuleKind::ALL {
            assert_eq!(kind.as_str().parse::<RuleKind>(), Ok(kind));
        }
        assert!("acpDenyTool".parse::<RuleKind>().is_err());
    }

    #[test]
    fn suggested_prefixes() {
        assert_eq!(suggested_prefix("cargo test --all"), "cargo test");
        assert_eq!(suggested_prefix("ls -la"), "ls");
        assert_eq!(suggested_prefix("git status && rm x"), "git status");
    }

    #[test]
    fn modes() {
        let rules = PermissionRules::default();
        let write = meta_for("write_file").unwrap();
        let shell = meta_for("shell").unwrap();
        let read = meta_for("read_file").unwrap();
        assert_eq!(evaluate(Mode::Ask, &rules, read, None), Verdict::Allow);
        assert!(matches!(
            evaluate(Mode::Ask, &rules, write, None),
            Verdict::Ask { .. }
        ));
        assert_eq!(
            evaluate(Mode::AutoEdit, &rules, write, None),
            Verdict::Allow
        );
        assert!(matches!(
            evaluate(Mode::AutoEdit, &rules, shell, Some("ls")),
            Verdict::Ask { .. }
        ));
        assert!(matches!(
            evaluate(Mode::Plan, &rules, write, None),
            Verdict::Refuse { .. }
        ));
        assert!(matches!(
            evaluate(Mode::Plan, &rules, shell, Some("ls")),
            Verdict::Refuse { .. }
        ));
        assert_eq!(
            evaluate(Mode::FullAuto, &rules, shell, Some("ls")),
            Verdict::Allow
        );
        assert!(!offered(Mode::Plan, write));
        assert!(offered(Mode::Plan, read));
    }

    #[test]
    fn rules_allow() {
        let rules = PermissionRules {
            tools: vec!["write_file".into()],
            command_prefixes: vec!["cargo test".into()],
            ..PermissionRules::default()
        };
        let write = meta_for("write_file").unwrap();
        let shell = meta_for("shell").unwrap();
        assert_eq!(evaluate(Mode::Ask, &rules, write, None), Verdict::Allow);
        assert_eq!(
            evaluate(Mode::Ask, &rules, shell, Some("cargo test -q")),
            Verdict::Allow
        );
        assert!(matches!(
            evaluate(Mode::Ask, &rules, shell, Some("cargo test; curl x")),
            Verdict::Ask { .. }
        ));
    }
}
