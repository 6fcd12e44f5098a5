//! Control-message storms and load against the real binary: seeded random interleavings of
//! prompt, steer, stop, approve and answer across several sessions (no deadlock, nothing after a
//! turn's end, no write without its approval), and 50 concurrent sessions × 20 turns (no store
//! errors, no cross-session leak, bounded memory).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::support::*;
use serde_json::{json, Value};

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// No event of a turn arrives after that turn's `turnEnded`, and seq has no gaps.
fn check_event_log(events: &[Value]) {
    assert_seq_gap_free(events);
    let mut ended: HashSet<String> = HashSet::new();
    for event in events {
        let Some(turn) = event["turnId"].as_str() else {
            continue;
        };
        assert!(!ended.contains(turn), "event after turnEnded: {event}");
        if event["type"] == "turnEnded" {
            ended.insert(turn.to_owned());
        }
    }
}

#[tokio::test]
async fn random_control_storms_never_deadlock_or_write_unapproved() {
    let mock = MockLlm::start().await;
    let mut rng = SplitMix(0x5702_3A11);
    for i in 0..400 {
        let script = match rng.below(4) {
            0 => Script::tool_call_reply(
                &format!("w{i}"),
                "write_file",
                json!({"path": format!("w{i}.txt"), "content": format!("call w{i}\n")}),
            ),
            1 => Script::tool_call_reply(
                &format!("q{i}"),
                "ask_user",
                json!({"question": format!("question {i}?")}),
            ),
            2 => Script::new()
                .role()
                .text("slow ")
                .delay(std::time::Duration::from_millis(rng.below(20)))
                .text("answer")
                .finish("stop")
                .done(),
            _ => Script::text_reply("quick answer"),
        };
        mock.push(script);
    }
    let t = Tandem::start_with(
        TandemOptions::with_mock(&mock).config(config_with(&mock, "provider_max_attempts = 1")),
    )
    .await;
    let workspaces: Vec<_> = (0..3).map(|_| workspace()).collect();
    let mut sessions = Vec::new();
    for ws in &workspaces {
        sessions.push(t.new_session(ws.path()).await);
    }
    let mut approved: HashSet<String> = HashSet::new();
    let mut answered: HashSet<String> = HashSet::new();
    for step in 0..300 {
        let s = rng.below(sessions.len() as u64) as usize;
        let sid = &sessions[s];
        match rng.below(6) {
            0 | 1 => {
                let prompted = t
                    .request(
                        "prompt",
                        json!({"sessionId": sid, "content": format!("step {step}")}),
                    )
                    .await;
                // Half the time, answer the turn's first request as soon as it appears, so the
                // approval path is exercised whatever the timing.
                if let (Ok(result), 0) = (prompted, rng.below(2)) {
                    let turn = result["turnId"].as_str().unwrap().to_owned();
                    let event = t
                        .wait_event(sid, |e| {
                            e["turnId"] == turn.as_str()
                                && ["approvalRequested", "questionAsked", "turnEnded"]
                                    .contains(&e["type"].as_str().unwrap_or_default())
                        })
                        .await;
                    if event["type"] == "approvalRequested" {
                        let request_id = event["requestId"].as_str().unwrap().to_owned();
                        answered.insert(request_id.clone());
                        let decision = if rng.below(3) == 0 { "deny" } else { "once" };
                        let result = t
                            .request(
                                "approve",
                                json!({"sessionId": sid, "requestId": request_id, "decision": decision}),
                            )
                            .await;
                        if result.is_ok() && decision == "once" {
                            approved.insert(event["toolCallId"].as_str().unwrap().to_owned());
                        }
                    }
                }
            }
            2 => {
                let _ = t
                    .request(
                        "steer",
                        json!({"sessionId": sid, "text": format!("steer {step}")}),
                    )
                    .await;
            }
            3 => {
                let stopped = t.request("stop", json!({"sessionId": sid})).await;
                assert!(stopped.is_ok(), "stop failed: {stopped:?}");
            }
            _ => {
                // Answer whatever is open, with a random decision; stale answers are fine.
                for event in t.events(sid) {
                    let request_id = event["requestId"].as_str().unwrap_or_default().to_owned();
                    if event["type"] == "approvalRequested" && !answered.contains(&request_id) {
                        answered.insert(request_id.clone());
                        let decision = if rng.below(2) == 0 { "once" } else { "deny" };
                        let result = t
                            .request(
                                "approve",
                                json!({"sessionId": sid, "requestId": request_id, "decision": decision}),
                            )
                            .await;
                        if result.is_ok() && decision == "once" {
                            approved.insert(event["toolCallId"].as_str().unwrap().to_owned());
                        }
                    }
                    if event["type"] == "questionAsked" && !answered.contains(&request_id) {
                        answered.insert(request_id.clone());
                        let _ = t
                            .request(
                                "answer",
                                json!({"sessionId": sid, "requestId": request_id, "answer": "sure"}),
                            )
                            .await;
                    }
                }
            }
        }
    }
    // Everything still answers: stop every session and see each one end.
    for sid in &sessions {
        let stopped = t.request("stop", json!({"sessionId": sid})).await;
        assert!(stopped.is_ok());
        check_event_log(&t.events(sid));
    }
    let mut writes = 0;
    for ws in &workspaces {
        for entry in std::fs::read_dir(ws.path()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".txt") else {
                continue;
            };
            writes += 1;
            assert!(
                approved.contains(id),
                "{name} was written without an approval"
            );
        }
    }
    let asked: usize = sessions
        .iter()
        .map(|sid| t.events_of_type(sid, "approvalRequested").len())
        .sum();
    let turns: usize = sessions
        .iter()
        .map(|sid| t.events_of_type(sid, "turnEnded").len())
        .sum();
    eprintln!(
        "storm: 300 control messages over 3 sessions, {turns} turns, {asked} approvals asked, {} allowed, {writes} files written",
        approved.len()
    );
    // The storm must have exercised approvals at all, or the property above proves nothing.
    assert!(
        asked > 5 && !approved.is_empty() && writes > 0,
        "the storm never reached the approval path"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn fifty_sessions_by_twenty_turns_stay_separate_and_lean() {
    const SESSIONS: usize = 50;
    const TURNS: usize = 20;
    let mock = MockLlm::start().await;
    for _ in 0..SESSIONS * TURNS {
        mock.push(Script::text_reply("noted"));
    }
    let t = Arc::new(Tandem::start(&mock).await);
    let ws = workspace();
    let mut sids = Vec::new();
    for _ in 0..SESSIONS {
        sids.push(t.new_session(ws.path()).await);
    }
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for (n, sid) in sids.iter().cloned().enumerate() {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            for turn in 0..TURNS {
                let id = t.prompt(&sid, &format!("token-{n}-{turn}")).await;
                let events = t.wait_turn(&sid, &id).await;
                let end = events.last().unwrap();
                assert_eq!(end["reason"], "completed", "session {n} turn {turn}: {end}");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    // No request mixes sessions: each carries the tokens of exactly one session.
    let mut owner: HashMap<String, usize> = HashMap::new();
    for request in mock.requests() {
        let text = request.to_string();
        let sessions_seen: HashSet<usize> = (0..SESSIONS)
            .filter(|n| text.contains(&format!("token-{n}-")))
            .collect();
        assert_eq!(
            sessions_seen.len(),
            1,
            "a request mixes sessions: {sessions_seen:?}"
        );
        let n = *sessions_seen.iter().next().unwrap();
        *owner.entry(n.to_string()).or_default() += 1;
    }
    assert_eq!(owner.len(), SESSIONS);
    for (n, sid) in sids.iter().enumerate() {
        let events = t.events(sid);
        check_event_log(&events);
        let text = serde_json::to_string(&events).unwrap();
        assert!(
            !text.contains("store"),
            "no store error surfaced in session {n}"
        );
        let loaded = t.load_session(sid).await;
        assert_eq!(loaded["messages"].as_array().unwrap().len(), TURNS * 2);
    }
    let rss = t.rss_kib().await.expect("server RSS");
    assert!(
        rss < 200 * 1024,
        "RSS {rss} KiB after {} turns",
        SESSIONS * TURNS
    );
    let errors = t.stderr();
    assert!(
        !errors.contains("SQLITE_BUSY") && !errors.contains("database is locked"),
        "{errors}"
    );
    eprintln!(
        "load: {SESSIONS} sessions x {TURNS} turns in {:.2} s ({:.0} turns/s), server RSS {rss} KiB",
        elapsed.as_secs_f64(),
        (SESSIONS * TURNS) as f64 / elapsed.as_secs_f64()
    );
    match Arc::try_unwrap(t) {
        Ok(t) => t.shutdown().await,
        Err(_) => panic!("tandem handle still shared"),
    }
}
