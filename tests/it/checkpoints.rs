//! Checkpoints, `turn/diff`, `session/rewind`, `session/fork` and `session/delete` over the
//! real binary, real SQLite files and a real `git`: a turn that edits, writes and runs shell
//! commands (`rm`, `mv`, `mkdir`, `echo >`, `chmod`) is put back byte for byte (the whole tree
//! hashed, permission bits included), the user's `.git` stays byte-identical, conflicts are
//! left alone unless forced, the model's next request starts before the rewound turn, and it
//! all survives `kill -9`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support::*;
use serde_json::{json, Value};

/// Every entry under `root` (`.git` included when `with_git`): path → kind, mode and content.
fn tree(root: &Path, with_git: bool) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !with_git && (rel == ".git" || rel.starts_with(".git/")) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, format!("link {}", target.display()));
            } else if meta.is_dir() {
                out.insert(rel, format!("dir {mode:o}"));
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.insert(
                    rel,
                    format!("file {mode:o} {}", String::from_utf8_lossy(&bytes)),
                );
            }
        }
    }
    out
}

fn git(ws: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(ws)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .status()
        .expect("run git");
    assert!(status.success(), "git {args:?} failed");
}

fn write(ws: &Path, rel: &str, content: &str) {
    let path = ws.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

async fn full_auto(t: &Tandem, ws: &Path) -> String {
    t.initialize().await;
    t.new_session_in(ws, "fullAuto").await
}

async fn run_turn(t: &Tandem, sid: &str, prompt: &str) -> String {
    let turn = t.prompt(sid, prompt).await;
    let events = t.wait_turn(sid, &turn).await;
    let end = events.iter().find(|e| e["type"] == "turnEnded").unwrap();
    assert_eq!(end["reason"], "completed", "{events:#?}");
    turn
}

async fn rewind(t: &Tandem, sid: &str, turn: &str, restore: &str, force: bool) -> Value {
    t.request_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": turn, "restore": restore, "force": force}),
    )
    .await
}

#[tokio::test]
async fn a_turn_of_edits_writes_and_shell_commands_is_put_back_byte_for_byte_and_git_is_untouched()
{
    let ws = workspace();
    let root = ws.path();
    write(root, "a.txt", "alpha\n");
    write(root, "c.txt", "to be removed\n");
    write(root, "d.txt", "to be moved\n");
    write(root, "g.sh", "#!/bin/sh\necho g\n");
    write(root, "sub/keep.txt", "kept\n");
    write(root, ".gitignore", "ignored/\n");
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "start"]);
    write(root, "a.txt", "alpha, staged\n");
    git(root, &["add", "a.txt"]);
    git(root, &["stash", "-q"]);
    let before = tree(root, false);
    let git_before = tree(&root.join(".git"), true);

    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "e1",
        "edit_file",
        json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
    ));
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "new/deeper/b.txt", "content": "bee\n"}),
    ));
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "rm c.txt && mv d.txt e.txt && mkdir made && echo hi > made/f.txt && chmod +x g.sh && echo more >> a.txt && rm -r sub"}),
    ));
    mock.push(Script::text_reply("all done"));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, root).await;
    let turn = run_turn(&t, &sid, "change many things").await;

    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "ALPHA\nmore\n"
    );
    assert!(!root.join("c.txt").exists() && root.join("e.txt").exists());
    assert_ne!(tree(root, false), before);

    // turn/diff: every path the turn changed, with texts.
    let diff = t
        .request_ok("turn/diff", json!({"sessionId": sid, "turnId": turn}))
        .await;
    let files: BTreeMap<String, Value> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_owned(), f.clone()))
        .collect();
    let change = |p: &str| {
        files
            .get(p)
            .map(|f| f["change"].as_str().unwrap().to_owned())
    };
    assert_eq!(change("a.txt").as_deref(), Some("modified"), "{diff:#}");
    assert_eq!(files["a.txt"]["oldText"], "alpha\n");
    assert_eq!(files["a.txt"]["newText"], "ALPHA\nmore\n");
    assert!(files["a.txt"]["unified"]
        .as_str()
        .unwrap()
        .contains("-alpha\n+ALPHA\n"));
    assert_eq!(change("new").as_deref(), Some("added"));
    assert_eq!(change("new/deeper/b.txt").as_deref(), Some("added"));
    assert_eq!(files["new/deeper/b.txt"]["oldText"], Value::Null);
    assert_eq!(change("c.txt").as_deref(), Some("deleted"));
    assert_eq!(change("d.txt").as_deref(), Some("deleted"));
    assert_eq!(change("e.txt").as_deref(), Some("added"));
    assert_eq!(change("made/f.txt").as_deref(), Some("added"));
    assert_eq!(change("g.sh").as_deref(), Some("modified"));
    assert_eq!(change("sub/keep.txt").as_deref(), Some("deleted"));
    assert!(files.keys().all(|p| !p.starts_with(".git")), "{diff:#}");

    let checkpoints = t
        .request_ok("session/checkpoints", json!({"sessionId": sid}))
        .await;
    let list = checkpoints["checkpoints"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{checkpoints:#}");
    assert_eq!(list[0]["turnId"], turn.as_str());
    assert_eq!(list[0]["prompt"], "change many things");
    assert_eq!(list[0]["files"].as_array().unwrap().len(), files.len());

    let result = rewind(&t, &sid, &turn, "both", false).await;
    assert_eq!(result["conflicts"], json!([]), "{result:#}");
    assert_eq!(result["conversationRewound"], true);
    assert_eq!(tree(root, false), before, "the tree is back byte for byte");
    assert_eq!(tree(&root.join(".git"), true), git_before, ".git untouched");
    let rewound = t.wait_event_type(&sid, "rewound").await;
    assert_eq!(rewound["turnId"], turn.as_str());
    assert_eq!(rewound["restore"], "both");

    // The conversation: the model's next request starts before the rewound turn, and the
    // display history shows the rewind where the turn was.
    mock.push(Script::text_reply("fresh start"));
    run_turn(&t, &sid, "second try").await;
    let last = mock.requests().last().unwrap().to_string();
    assert!(!last.contains("change many things"), "{last}");
    assert!(last.contains("second try"));
    let loaded = t.load_session(&sid).await;
    let messages = loaded["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "notice", "{loaded:#}");
    assert_eq!(messages[0]["kind"], "rewound");
    assert_eq!(messages[1]["text"], "second try");
    // The rewound rows are still in the database.
    let db = rusqlite::Connection::open(t.data_dir().join("tandem.sqlite3")).unwrap();
    let superseded: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM superseded_messages WHERE session_id = ?1 AND rewind_turn_id = ?2",
            [&sid, &turn],
            |r| r.get(0),
        )
        .unwrap();
    assert!(superseded >= 5, "{superseded}");
    // The rewound turn is no turn of the conversation any more.
    let gone = t
        .request_err(
            "session/rewind",
            json!({"sessionId": sid, "turnId": turn, "restore": "conversation"}),
        )
        .await;
    assert_eq!(gone.kind, "unknownTurn");
    t.shutdown().await;
}

#[tokio::test]
async fn a_file_changed_since_the_turn_is_a_conflict_left_alone_unless_forced() {
    let ws = workspace();
    let root = ws.path();
    write(root, "a.txt", "one\n");
    write(root, "b.txt", "bee\n");
    let mock = MockLlm::start().await;
    mock.push(Script::tool_calls(vec![
        (
            "w1",
            "write_file",
            json!({"path": "a.txt", "content": "two\n"}).to_string(),
        ),
        (
            "w2",
            "write_file",
            json!({"path": "b.txt", "content": "BEE\n"}).to_string(),
        ),
    ]));
    mock.push(Script::text_reply("written"));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, root).await;
    let turn = run_turn(&t, &sid, "write them").await;
    // The user edits a.txt after the turn.
    std::fs::write(root.join("a.txt"), "mine\n").unwrap();

    let result = rewind(&t, &sid, &turn, "files", false).await;
    assert_eq!(result["restored"], json!(["b.txt"]), "{result:#}");
    let conflicts = result["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0]["path"], "a.txt");
    assert!(conflicts[0]["reason"].as_str().unwrap().contains("force"));
    assert_eq!(result["conversationRewound"], false);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("b.txt")).unwrap(),
        "bee\n"
    );
    let listed = t
        .request_ok("session/checkpoints", json!({"sessionId": sid}))
        .await;
    assert_eq!(
        listed["checkpoints"][0]["filesRestored"], true,
        "{listed:#}"
    );

    let forced = rewind(&t, &sid, &turn, "files", true).await;
    assert_eq!(forced["restored"], json!(["a.txt"]), "{forced:#}");
    assert_eq!(forced["conflicts"], json!([]));
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "one\n"
    );
    // The conversation still has the turn: files only.
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["messages"][0]["text"], "write them");
    t.shutdown().await;
}

#[tokio::test]
async fn a_rewind_of_several_turns_restores_in_reverse_order_and_a_change_between_turns_conflicts()
{
    let ws = workspace();
    let root = ws.path();
    write(root, "n.txt", "1\n");
    let mock = MockLlm::start().await;
    for (id, content) in [("w1", "2\n"), ("w2", "3\n")] {
        mock.push(Script::tool_call_reply(
            id,
            "write_file",
            json!({"path": "n.txt", "content": content}),
        ));
        mock.push(Script::text_reply("ok"));
    }
    mock.push(Script::tool_call_reply(
        "s3",
        "shell",
        json!({"command": "echo 4 > n.txt && echo x > m.txt"}),
    ));
    mock.push(Script::text_reply("ok"));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, root).await;
    let first = run_turn(&t, &sid, "to two").await;
    let second = run_turn(&t, &sid, "to three").await;
    // Somebody else changes m.txt's future neighbour between turns: unrelated, no conflict.
    let third = run_turn(&t, &sid, "to four").await;
    assert_eq!(std::fs::read_to_string(root.join("n.txt")).unwrap(), "4\n");

    // Only the last turn: back to 3, m.txt gone.
    let r = rewind(&t, &sid, &third, "files", false).await;
    assert_eq!(r["conflicts"], json!([]), "{r:#}");
    assert_eq!(std::fs::read_to_string(root.join("n.txt")).unwrap(), "3\n");
    assert!(!root.join("m.txt").exists());
    // The first two turns at once: back to 1.
    let r = rewind(&t, &sid, &first, "both", false).await;
    assert_eq!(r["conflicts"], json!([]), "{r:#}");
    assert_eq!(std::fs::read_to_string(root.join("n.txt")).unwrap(), "1\n");
    let listed = t
        .request_ok("session/checkpoints", json!({"sessionId": sid}))
        .await;
    assert_eq!(listed["checkpoints"], json!([]), "{listed:#}");
    let _ = second;

    // A change made between two turns by someone else is a conflict of the older rewind.
    mock.push(Script::tool_call_reply(
        "w4",
        "write_file",
        json!({"path": "n.txt", "content": "A\n"}),
    ));
    mock.push(Script::text_reply("ok"));
    mock.push(Script::tool_call_reply(
        "w5",
        "write_file",
        json!({"path": "n.txt", "content": "C\n"}),
    ));
    mock.push(Script::text_reply("ok"));
    let fourth = run_turn(&t, &sid, "to A").await;
    std::fs::write(root.join("n.txt"), "B\n").unwrap();
    let _fifth = run_turn(&t, &sid, "to C").await;
    let r = rewind(&t, &sid, &fourth, "files", false).await;
    assert_eq!(r["conflicts"][0]["path"], "n.txt", "{r:#}");
    assert!(r["conflicts"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("between"));
    assert_eq!(std::fs::read_to_string(root.join("n.txt")).unwrap(), "C\n");
    t.shutdown().await;
}

#[tokio::test]
async fn a_rewind_while_a_turn_runs_is_refused_with_turn_in_progress() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let gate = Gate::new();
    mock.push(Script::text_reply("slow").hold_head_until(&gate));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, ws.path()).await;
    let turn = t.prompt(&sid, "take your time").await;
    let refused = t
        .request_err(
            "session/rewind",
            json!({"sessionId": sid, "turnId": turn, "restore": "both"}),
        )
        .await;
    assert_eq!(refused.kind, "turnInProgress", "{refused:?}");
    let fork = t
        .request_err("session/fork", json!({"sessionId": sid}))
        .await;
    assert_eq!(fork.kind, "turnInProgress");
    gate.open();
    t.wait_turn(&sid, &turn).await;
    let unknown = t
        .request_err("turn/diff", json!({"sessionId": sid, "turnId": "t_nope"}))
        .await;
    assert_eq!(unknown.kind, "unknownTurn");
    t.shutdown().await;
}

#[tokio::test]
async fn a_fork_shares_the_history_before_its_turn_and_leaves_the_source_unchanged() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("first answer"));
    mock.push(Script::text_reply("second answer"));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, ws.path()).await;
    run_turn(&t, &sid, "first question").await;
    let second = run_turn(&t, &sid, "second question").await;
    let source_before = t.load_session(&sid).await["messages"].clone();

    let fork = t
        .request_ok("session/fork", json!({"sessionId": sid, "turnId": second}))
        .await;
    let fork_id = fork["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, sid);
    let forked = t.load_session(&fork_id).await;
    let texts: Vec<&str> = forked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert_eq!(texts, ["first question", "first answer"], "{forked:#}");
    mock.push(Script::text_reply("forked answer"));
    run_turn(&t, &fork_id, "a different follow-up").await;
    let request = mock.requests().last().unwrap().to_string();
    assert!(request.contains("first answer") && !request.contains("second question"));
    assert_eq!(t.load_session(&sid).await["messages"], source_before);

    // A whole-history fork of an idle session.
    let whole = t
        .request_ok("session/fork", json!({"sessionId": sid}))
        .await;
    let whole = t.load_session(whole["sessionId"].as_str().unwrap()).await;
    assert_eq!(whole["messages"], source_before);
    t.shutdown().await;
}

#[tokio::test]
async fn a_rewind_after_kill_9_puts_the_files_back() {
    let ws = workspace();
    let root = ws.path();
    write(root, "keep.txt", "original\n");
    let before = tree(root, false);
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo changed > keep.txt && mkdir out && echo y > out/new.txt"}),
    ));
    mock.push(Script::text_reply("done"));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, root).await;
    let turn = run_turn(&t, &sid, "shell it").await;
    t.kill().await;

    let t = t.respawn().await;
    t.initialize().await;
    t.load_session(&sid).await;
    let r = rewind(&t, &sid, &turn, "files", false).await;
    assert_eq!(r["conflicts"], json!([]), "{r:#}");
    assert_eq!(tree(root, false), before);
    t.shutdown().await;
}

#[tokio::test]
async fn files_over_5_mib_are_listed_as_not_captured_and_deleting_the_session_prunes_its_contents()
{
    let ws = workspace();
    let root = ws.path();
    std::fs::write(root.join("big.bin"), vec![7u8; 6 * 1024 * 1024]).unwrap();
    write(root, "small.txt", "s\n");
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo tail >> big.bin && echo t >> small.txt"}),
    ));
    mock.push(Script::text_reply("done"));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, root).await;
    let turn = run_turn(&t, &sid, "grow them").await;
    let diff = t
        .request_ok("turn/diff", json!({"sessionId": sid, "turnId": turn}))
        .await;
    let big = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "big.bin")
        .cloned()
        .unwrap_or_else(|| panic!("{diff:#}"));
    assert!(
        big["notCaptured"].as_str().unwrap().contains("5 MiB"),
        "{big:#}"
    );
    let r = rewind(&t, &sid, &turn, "files", true).await;
    assert_eq!(r["restored"], json!(["small.txt"]), "{r:#}");
    assert_eq!(r["conflicts"][0]["path"], "big.bin");
    assert!(r["conflicts"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("cannot be put back"));

    let db_path = t.data_dir().join("tandem.sqlite3");
    let count = |table: &str| -> i64 {
        let db = rusqlite::Connection::open(&db_path).unwrap();
        db.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    assert!(count("checkpoint_blobs") > 0);
    t.request_ok("session/delete", json!({"sessionId": sid}))
        .await;
    assert_eq!(count("checkpoint_files"), 0);
    assert_eq!(count("checkpoint_blobs"), 0);
    assert_eq!(count("sessions"), 0);
    let gone = t
        .request_err("session/checkpoints", json!({"sessionId": sid}))
        .await;
    assert_eq!(gone.kind, "unknownSession");
    t.shutdown().await;
}

#[tokio::test]
async fn a_command_cut_by_kill_9_is_settled_into_its_turn_and_can_be_rewound() {
    let ws = workspace();
    let root = ws.path();
    write(root, "a.txt", "before the crash\n");
    let before = tree(root, false);
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo during > a.txt; mkdir half; echo started; sleep 30"}),
    ));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, root).await;
    let turn = t.prompt(&sid, "crash in the middle").await;
    t.wait_event(&sid, |e| {
        e["type"] == "toolCallUpdate" && e["output"].as_str().is_some_and(|o| o.contains("started"))
    })
    .await;
    t.kill().await;
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "during\n"
    );

    let t = t.respawn().await;
    t.initialize().await;
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["state"], "idle", "{loaded:#}");
    let diff = t
        .request_ok("turn/diff", json!({"sessionId": sid, "turnId": turn}))
        .await;
    let paths: Vec<&str> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.txt", "half"], "{diff:#}");
    let r = rewind(&t, &sid, &turn, "files", false).await;
    assert_eq!(r["conflicts"], json!([]), "{r:#}");
    assert_eq!(tree(root, false), before);
    t.shutdown().await;
}

#[tokio::test]
async fn the_conflicts_of_a_both_rewind_can_be_forced_afterwards() {
    let ws = workspace();
    let root = ws.path();
    write(root, "a.txt", "one\n");
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "a.txt", "content": "two\n"}),
    ));
    mock.push(Script::text_reply("written"));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, root).await;
    let turn = run_turn(&t, &sid, "write it").await;
    std::fs::write(root.join("a.txt"), "mine\n").unwrap();
    let both = rewind(&t, &sid, &turn, "both", false).await;
    assert_eq!(both["conflicts"][0]["path"], "a.txt", "{both:#}");
    assert_eq!(both["conversationRewound"], true);
    // The turn is gone from the conversation, its changes are not: still shown, still forced.
    let diff = t
        .request_ok("turn/diff", json!({"sessionId": sid, "turnId": turn}))
        .await;
    assert_eq!(diff["files"][0]["newText"], "two\n", "{diff:#}");
    let forced = rewind(&t, &sid, &turn, "files", true).await;
    assert_eq!(forced["restored"], json!(["a.txt"]), "{forced:#}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "one\n"
    );
    let unknown = t
        .request_err(
            "session/rewind",
            json!({"sessionId": sid, "turnId": "t_never", "restore": "files"}),
        )
        .await;
    assert_eq!(unknown.kind, "unknownTurn");
    t.shutdown().await;
}

#[tokio::test]
async fn ignored_paths_a_command_changes_are_listed_and_reported_per_file_by_the_rewind() {
    let ws = workspace();
    let root = ws.path();
    write(root, ".gitignore", "*.log\nbuild/\n");
    write(root, "debug.log", "old log\n");
    write(root, "kept.txt", "k\n");
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo more >> debug.log && mkdir build && echo o > build/out.o && echo K > kept.txt"}),
    ));
    mock.push(Script::text_reply("built"));
    let t = Tandem::start(&mock).await;
    let sid = full_auto(&t, root).await;
    let turn = run_turn(&t, &sid, "build it").await;
    let diff = t
        .request_ok("turn/diff", json!({"sessionId": sid, "turnId": turn}))
        .await;
    let files: BTreeMap<String, Value> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_owned(), f.clone()))
        .collect();
    assert_eq!(files["debug.log"]["change"], "modified", "{diff:#}");
    assert!(files["debug.log"]["notCaptured"]
        .as_str()
        .unwrap()
        .contains("ignored"));
    assert_eq!(files["build"]["change"], "added");
    assert!(
        !files.contains_key("build/out.o"),
        "nothing below an ignored folder"
    );
    assert_eq!(files["kept.txt"]["newText"], "K\n");

    let r = rewind(&t, &sid, &turn, "files", true).await;
    assert_eq!(r["restored"], json!(["kept.txt"]), "{r:#}");
    let conflicts: BTreeMap<String, String> = r["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_owned(),
                c["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(conflicts.len(), 2, "{r:#}");
    assert!(conflicts["debug.log"].contains("ignored"));
    assert!(conflicts["build"].contains("ignored"));
    assert_eq!(
        std::fs::read_to_string(root.join("debug.log")).unwrap(),
        "old log\nmore\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("kept.txt")).unwrap(),
        "k\n"
    );
    t.shutdown().await;
}
