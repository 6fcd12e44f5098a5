//! Skills in Claude Code's layout over the real binary: a `.claude/skills/<name>/SKILL.md` tree
//! (written here, in the shape of the public examples) is listed by name and description in the
//! system prompt, byte-identical from one request to the next; the `skill` tool returns the body
//! with the skill's files, and one of those files; nothing outside the skill's folder.

use crate::support::*;
use serde_json::json;

fn system_prompt(request: &serde_json::Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_claude_skills_tree_is_listed_and_loaded_by_the_skill_tool() {
    let ws = workspace();
    let skill = ws.path().join(".claude/skills/changelog");
    std::fs::create_dir_all(skill.join("templates")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: changelog\ndescription: Write a CHANGELOG entry in the project's style\n---\n# Changelog entries\n\nRead templates/entry.md and follow it.\n",
    )
    .unwrap();
    std::fs::write(
        skill.join("templates/entry.md"),
        "## [version] - date\n- change\n",
    )
    .unwrap();
    std::fs::write(ws.path().join("outside.txt"), "not a skill file\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "k1",
        "skill",
        json!({"name": "changelog"}),
    ));
    mock.push(Script::tool_call_reply(
        "k2",
        "skill",
        json!({"name": "changelog", "file": "templates/entry.md"}),
    ));
    mock.push(Script::tool_call_reply(
        "k3",
        "skill",
        json!({"name": "changelog", "file": "../../../outside.txt"}),
    ));
    mock.push(Script::text_reply("done"));
    let t = Tandem::start(&mock).await;
    t.initialize().await;
    let sid = t.new_session_in(ws.path(), "plan").await;
    let turn = t.prompt(&sid, "add a changelog entry").await;
    let events = t.wait_turn(&sid, &turn).await;
    assert!(events.iter().all(|e| e["type"] != "approvalRequested"));
    let result = |id: &str| -> String {
        events
            .iter()
            .find(|e| {
                e["type"] == "toolCallUpdate" && e["toolCallId"] == id && e["result"].is_string()
            })
            .map(|e| e["result"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| panic!("no result for {id}: {events:#?}"))
    };
    let body = result("k1");
    assert!(
        body.contains("Read templates/entry.md and follow it."),
        "{body}"
    );
    assert!(body.contains("- templates/entry.md"), "{body}");
    assert!(
        !body.contains("description:"),
        "the front matter is not the body: {body}"
    );
    assert_eq!(result("k2"), "## [version] - date\n- change\n");
    assert!(result("k3").contains("not a text file of skill"));

    let requests = mock.requests();
    let first = system_prompt(&requests[0]);
    assert!(
        first.contains("- changelog: Write a CHANGELOG entry in the project's style"),
        "{first}"
    );
    assert!(
        !first.contains("Read templates/entry.md"),
        "only names and descriptions"
    );
    for later in &requests[1..] {
        assert_eq!(
            system_prompt(later),
            first,
            "the system prompt stays byte-identical"
        );
    }
    t.shutdown().await;
}
