//! Hooks: what a `PreToolUse` hook that exits at once adds to a tool call.
//!
//! Two `tandem serve` processes on one loopback mock, alike except that one has a user hook file
//! (`XDG_CONFIG_HOME/tandem/hooks.json`) with a `PreToolUse` hook `exit 0` matching `read_file`.
//! Each turn is one `read_file` call of a small file and a closing text; a fresh session per
//! turn, the two servers alternating. What is timed per call is from its `toolCall` event (the
//! call announced, before it is authorized and before the hook runs) to its `completed` update.
//! The figure is the median with the hook minus the median without; the anchor is the median
//! without.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;
use crate::mock::{chat_tool_results, MockLlm, Reply, Wire};
use crate::rpc::{
    tandem_close, tandem_command, tandem_initialize, tandem_new_session, tandem_turn,
};

const WARMUPS: usize = 3;
/// Many runs: one call is about a millisecond, which a shared 2-core machine swings easily.
const RUNS: usize = 60;

pub struct HookFigures {
    with_hook: Duration,
    without: Duration,
    spread: (Duration, Duration),
}

impl HookFigures {
    pub fn rows(&self) -> Vec<Row> {
        vec![Row::duration(
            "A PreToolUse hook that exits at once, added to a read_file call (median with − median without)",
            self.with_hook.saturating_sub(self.without),
            self.without,
            "the call without a hook",
            Some((Duration::from_millis(3), "≤ 3 ms")),
        )]
    }

    pub fn note(&self) -> String {
        format!(
            "Hooks: two `tandem serve` on one mock, one with a user `PreToolUse` hook `exit 0` matching read_file; \
             {RUNS} turns each after {WARMUPS} warm-ups, alternating; per call `toolCall` → `completed`. \
             With the hook: median {}, p10–p90 {}–{}.",
            format_duration(self.with_hook),
            format_duration(self.spread.0),
            format_duration(self.spread.1),
        )
    }
}

fn brain(request: &Value) -> Reply {
    if chat_tool_results(request) == 0 {
        Reply::ToolCalls(vec![(
            "call_read".to_owned(),
            "read_file".to_owned(),
            json!({"path": "small.txt"}).to_string(),
        )])
    } else {
        Reply::Text("read it".to_owned())
    }
}

pub fn measure(bin: &Path, runtime: &tokio::runtime::Runtime) -> Result<HookFigures> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(
        workspace.path().join("small.txt"),
        "a small file\n".repeat(20),
    )?;
    let plain_dir = tempfile::tempdir()?;
    let hooked_dir = tempfile::tempdir()?;
    let config_home = hooked_dir.path().join("config");
    std::fs::create_dir_all(config_home.join("tandem"))?;
    std::fs::write(
        config_home.join("tandem/hooks.json"),
        json!({"hooks": {"PreToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": "exit 0"}]}]}})
            .to_string(),
    )?;
    progress(&format!(
        "hooks: {WARMUPS} warm-up + {RUNS} one-call turns with and without a PreToolUse hook, alternating"
    ));
    runtime.block_on(async {
        let mock = MockLlm::start(Wire::ChatCompletions, Arc::new(brain)).await?;
        let plain = tandem_command(bin, plain_dir.path(), &mock.base_url, workspace.path())?;
        let mut hooked = tandem_command(bin, hooked_dir.path(), &mock.base_url, workspace.path())?;
        hooked.env("XDG_CONFIG_HOME", &config_home);
        let mut servers = [
            crate::rpc::RpcChild::spawn("tandem", plain, plain_dir.path().join("stderr.log"))?,
            crate::rpc::RpcChild::spawn("tandem", hooked, hooked_dir.path().join("stderr.log"))?,
        ];
        for server in servers.iter_mut() {
            tandem_initialize(server).await?;
        }
        let mut samples = [Vec::new(), Vec::new()];
        for run in 0..WARMUPS + RUNS {
            for (i, server) in servers.iter_mut().enumerate() {
                let session = tandem_new_session(server, workspace.path()).await?;
                let log = tandem_turn(server, &session, "read the small file").await?;
                let announced = log.tool_calls.first().map(|(_, at)| *at);
                let completed = log
                    .tool_updates
                    .iter()
                    .find(|(_, status, _)| status == "completed")
                    .map(|(_, _, at)| *at);
                let (Some(announced), Some(completed)) = (announced, completed) else {
                    return Err(format!(
                        "the hook bench turn did not follow the script (server {i}): {:?}",
                        log.text
                    )
                    .into());
                };
                if run >= WARMUPS {
                    samples[i].push(completed - announced);
                }
            }
        }
        for server in servers.iter_mut() {
            tandem_close(server).await?;
        }
        let [without, with_hook] = samples;
        let mut sorted = with_hook.clone();
        sorted.sort();
        let spread = (percentile(&sorted, 10.0), percentile(&sorted, 90.0));
        Ok(HookFigures {
            with_hook: summarize(with_hook).median,
            without: summarize(without).median,
            spread,
        })
    })
}
