//! The native providers through the real binary: Anthropic's Messages API and Gemini's
//! `streamGenerateContent` against the mock on loopback (which speaks both vendors' streaming
//! formats and refuses requests those vendors would refuse), mid-session switches across
//! OpenAI-compatible → Anthropic → Gemini with every earlier tool call and result paired,
//! provider-private reasoning signatures returned only to their own vendor, images and PDFs to
//! capable and blind models, usage per model across switches, the model catalog, and API keys
//! from the environment.

use crate::support::*;
use serde_json::{json, Value};

const ANTHROPIC_KEY_VAR: &str = "TANDEM_TEST_ANTHROPIC_KEY";
const GEMINI_KEY_VAR: &str = "TANDEM_TEST_GEMINI_KEY";
const ANTHROPIC_KEY: &str = "sk-ant-test-4c1d";
const GEMINI_KEY: &str = "gm-test-77e0";

/// A config with one model per vendor on the mock: `gpt` (OpenAI-compatible, no vision),
/// `claude` and `gemini` (capabilities from the built-in catalog), `gpt-4o` (vision and PDF
/// from the catalog), `mock-vision` (images only).
fn config(mock: &MockLlm, default_model: &str) -> String {
    format!(
        r#"default_model = "{default_model}"
retry_base_delay_ms = 10
retry_max_delay_ms = 20

[providers.local]
kind = "openai"
base_url = "{openai}"

[providers.claude]
kind = "anthropic"
base_url = "{root}"
api_key_env = "{ANTHROPIC_KEY_VAR}"

[providers.google]
kind = "gemini"
base_url = "{root}"
api_key_env = "{GEMINI_KEY_VAR}"

[models.gpt]
provider = "local"
name = "mock-model"

[models.gpt-4o]
provider = "local"
name = "gpt-4o"

[models.mock-vision]
provider = "local"
name = "mock-vision-model"
vision = true

[models.claude]
provider = "claude"
name = "claude-sonnet-4-5"
thinking_budget = 2048

[models.gemini]
provider = "google"
name = "gemini-2.5-flash"
"#,
        openai = mock.base_url(),
        root = mock.root_url(),
    )
}

async fn start(mock: &MockLlm, default_model: &str) -> Tandem {
    let t = Tandem::start_with(
        TandemOptions::new()
            .config(config(mock, default_model))
            .env(ANTHROPIC_KEY_VAR, ANTHROPIC_KEY)
            .env(GEMINI_KEY_VAR, GEMINI_KEY),
    )
    .await;
    t.initialize().await;
    t
}

async fn completed(t: &Tandem, sid: &str, turn: &str) -> Vec<Value> {
    let events = t.wait_turn(sid, turn).await;
    let end = events.last().expect("turnEnded");
    assert_eq!(
        end["reason"],
        "completed",
        "turn did not complete: {end}\nstderr:\n{}",
        t.stderr_tail()
    );
    events
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

/// Every string anywhere inside `value`, to search a request for leaked private data.
fn contains_text(value: &Value, needle: &str) -> bool {
    value.to_string().contains(needle)
}

#[tokio::test]
async fn anthropic_turn_with_thinking_and_a_tool_call() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .reasoning("I should read ")
            .reasoning("the file.")
            .signature("SIG-ANTHROPIC-1")
            .text("Reading a.txt.")
            .tool_call("toolu_01", "read_file", r#"{"path":"a.txt"}"#)
            .finish("tool_calls")
            .usage_cached(1200, 40, 1000)
            .done(),
    );
    mock.push(Script::text_reply("It says alpha."));
    let t = start(&mock, "claude").await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "What is in a.txt?").await;
    let events = completed(&t, &sid, &turn).await;

    let reasoning: String = events
        .iter()
        .filter(|e| e["type"] == "reasoningDelta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(reasoning, "I should read the file.");
    let call = events.iter().find(|e| e["type"] == "toolCall").unwrap();
    assert_eq!(call["toolCallId"], "toolu_01");
    assert_eq!(call["arguments"], json!({"path": "a.txt"}));
    let done = events
        .iter()
        .find(|e| e["type"] == "toolCallUpdate" && e["status"] == "completed")
        .unwrap();
    assert!(done["result"].as_str().unwrap().contains("alpha"));
    let usage = events.iter().find(|e| e["type"] == "usage").unwrap();
    assert_eq!(usage["model"], "claude");
    assert_eq!(usage["inputTokens"], 1200, "cache reads count as input");
    assert_eq!(usage["outputTokens"], 40);
    assert_eq!(usage["cachedTokens"], 1000);

    let recorded = mock.recorded();
    assert_eq!(recorded.len(), 2);
    for r in &recorded {
        assert_eq!(r.dialect, Dialect::Anthropic);
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some(ANTHROPIC_KEY));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert!(r.header("authorization").is_none());
    }
    let first = &recorded[0].body;
    assert_eq!(first["model"], "claude-sonnet-4-5");
    assert_eq!(first["stream"], true);
    assert_eq!(first["max_tokens"], 64_000, "from the catalog");
    assert_eq!(
        first["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert!(first["system"][0]["text"].as_str().unwrap().len() > 10);
    let read_tool = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_file")
        .expect("read_file offered");
    assert_eq!(read_tool["input_schema"]["type"], "object");

    let second = &recorded[1].body;
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        3,
        "user, assistant, tool results: {second:#}"
    );
    let assistant = messages[1]["content"].as_array().unwrap();
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": "I should read the file.", "signature": "SIG-ANTHROPIC-1"}),
        "the signed thinking block goes back first"
    );
    assert_eq!(
        assistant[1],
        json!({"type": "text", "text": "Reading a.txt."})
    );
    assert_eq!(assistant[2]["type"], "tool_use");
    assert_eq!(assistant[2]["id"], "toolu_01");
    assert_eq!(assistant[2]["input"], json!({"path": "a.txt"}));
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_01");
    assert!(results[0]["content"].as_str().unwrap().contains("alpha"));
    // Prompt caching: exactly one breakpoint, on the last block of the last message.
    let last = results.last().unwrap();
    assert_eq!(last["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(second.to_string().matches("cache_control").count(), 1);

    // The signature is a sidecar: never shown to the client.
    let load = t.load_session(&sid).await;
    assert!(!contains_text(&load, "SIG-ANTHROPIC-1"), "{load:#}");
}

#[tokio::test]
async fn gemini_turn_with_thoughts_and_a_tool_call() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .reasoning("Thinking about files.")
            .signature("SIG-GEMINI-1")
            .tool_call("ignored-by-gemini", "read_file", r#"{"path":"a.txt"}"#)
            .finish("tool_calls")
            .usage(300, 12)
            .done(),
    );
    mock.push(Script::text_reply("alpha it is."));
    let t = start(&mock, "gemini").await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "Read a.txt").await;
    let events = completed(&t, &sid, &turn).await;
    assert!(types(&events).contains(&"reasoningDelta"));
    let call = events.iter().find(|e| e["type"] == "toolCall").unwrap();
    let call_id = call["toolCallId"].as_str().unwrap().to_owned();
    assert!(
        call_id.starts_with("gemini_"),
        "Gemini sends no ids; tandem makes one: {call_id}"
    );
    assert!(events
        .iter()
        .any(|e| e["type"] == "toolCallUpdate" && e["status"] == "completed"));
    let usage = events.iter().find(|e| e["type"] == "usage").unwrap();
    assert_eq!(
        (usage["model"].clone(), usage["inputTokens"].clone()),
        (json!("gemini"), json!(300))
    );

    let recorded = mock.recorded();
    assert_eq!(recorded.len(), 2);
    for r in &recorded {
        assert_eq!(r.dialect, Dialect::Gemini);
        assert_eq!(
            r.path,
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(r.header("x-goog-api-key"), Some(GEMINI_KEY));
        assert!(!r.path.contains(GEMINI_KEY), "the key stays out of the URL");
    }
    let first = &recorded[0].body;
    assert!(first["systemInstruction"]["parts"][0]["text"].is_string());
    assert_eq!(
        first["generationConfig"]["thinkingConfig"]["includeThoughts"],
        true
    );
    assert_eq!(first["generationConfig"]["maxOutputTokens"], 65_536);
    assert!(
        !contains_text(&first["tools"], "additionalProperties"),
        "Gemini's schema subset"
    );
    let second = &recorded[1].body;
    let contents = second["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{second:#}");
    assert_eq!(contents[1]["role"], "model");
    let call_part = &contents[1]["parts"][0];
    assert_eq!(
        call_part["functionCall"],
        json!({"name": "read_file", "args": {"path": "a.txt"}})
    );
    assert_eq!(call_part["thoughtSignature"], "SIG-GEMINI-1");
    assert!(
        !contains_text(&contents[1], "Thinking about files."),
        "thought text is not sent back"
    );
    assert_eq!(contents[2]["role"], "user");
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(response["name"], "read_file");
    assert!(response["response"]["content"]
        .as_str()
        .unwrap()
        .contains("alpha"));
}

/// OpenAI-compatible → Anthropic → Gemini → OpenAI-compatible in one session, one tool call
/// each: every request carries every earlier call paired with its result in that vendor's
/// shape (the mock refuses unpaired ones, and the test checks them too), each vendor's
/// reasoning signature goes back only to that vendor, and usage stays per model.
#[tokio::test]
async fn switching_vendors_mid_session_keeps_every_call_paired_and_signatures_private() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta\n").unwrap();
    std::fs::write(ws.path().join("c.txt"), "gamma\n").unwrap();
    let mock = MockLlm::start().await;
    let t = start(&mock, "gpt").await;
    let sid = t.new_session(ws.path()).await;

    // 1. OpenAI-compatible.
    mock.push(
        Script::new()
            .role()
            .tool_call("call_o1", "read_file", r#"{"path":"a.txt"}"#)
            .finish("tool_calls")
            .usage(100, 10)
            .done(),
    );
    mock.push(
        Script::new()
            .role()
            .text("A says alpha.")
            .finish("stop")
            .usage(110, 5)
            .done(),
    );
    let turn = t.prompt(&sid, "Read a.txt").await;
    completed(&t, &sid, &turn).await;

    // 2. Anthropic, with a signed thinking block.
    let switched = t.switch_model(&sid, "claude").await;
    assert_eq!(switched["model"], "claude");
    mock.push(
        Script::new()
            .reasoning("Now b.")
            .signature("SIG-ANTHROPIC-X")
            .tool_call("toolu_b", "read_file", r#"{"path":"b.txt"}"#)
            .finish("tool_calls")
            .usage(1000, 20)
            .done(),
    );
    mock.push(
        Script::new()
            .text("B says beta.")
            .finish("stop")
            .usage(1100, 6)
            .done(),
    );
    let turn = t.prompt(&sid, "Now read b.txt").await;
    completed(&t, &sid, &turn).await;

    // 3. Gemini, with a thought signature on its call.
    t.switch_model(&sid, "gemini").await;
    mock.push(
        Script::new()
            .signature("SIG-GEMINI-X")
            .tool_call("unused", "read_file", r#"{"path":"c.txt"}"#)
            .finish("tool_calls")
            .usage(500, 7)
            .done(),
    );
    mock.push(
        Script::new()
            .text("C says gamma.")
            .finish("stop")
            .usage(520, 3)
            .done(),
    );
    let turn = t.prompt(&sid, "And c.txt").await;
    let events = completed(&t, &sid, &turn).await;
    let gemini_call = events.iter().find(|e| e["type"] == "toolCall").unwrap()["toolCallId"]
        .as_str()
        .unwrap()
        .to_owned();

    // 4. Back to OpenAI-compatible.
    t.switch_model(&sid, "gpt").await;
    mock.push(
        Script::new()
            .role()
            .text("All read.")
            .finish("stop")
            .usage(200, 4)
            .done(),
    );
    let turn = t.prompt(&sid, "Summarize").await;
    completed(&t, &sid, &turn).await;

    let recorded = mock.recorded();
    assert_eq!(recorded.len(), 7, "{recorded:#?}");
    for r in &recorded {
        assert!(
            r.rejected.is_none(),
            "the vendor would refuse request {}: {:?}",
            r.path,
            r.rejected
        );
    }
    let dialects: Vec<Dialect> = recorded.iter().map(|r| r.dialect).collect();
    assert_eq!(
        dialects,
        vec![
            Dialect::OpenAi,
            Dialect::OpenAi,
            Dialect::Anthropic,
            Dialect::Anthropic,
            Dialect::Gemini,
            Dialect::Gemini,
            Dialect::OpenAi
        ]
    );

    // Anthropic's first request carries the OpenAI call as tool_use + tool_result.
    let anthropic = &recorded[2].body;
    let messages = anthropic["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        vec!["user", "assistant", "user", "assistant", "user"]
    );
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[1]["content"][0]["id"], "call_o1");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "call_o1");
    assert!(messages[2]["content"][0]["content"]
        .as_str()
        .unwrap()
        .contains("alpha"));
    // An assistant in its tool loop written by another vendor has no thinking block, so the
    // request goes without thinking rather than being refused; here the loop is closed.
    assert!(anthropic.get("thinking").is_some());
    // Its second request sends its own signature back.
    assert!(contains_text(&recorded[3].body, "SIG-ANTHROPIC-X"));

    // Gemini's first request: both earlier calls as functionCall/functionResponse pairs, none of
    // Anthropic's private data.
    let gemini = &recorded[4].body;
    let contents = gemini["contents"].as_array().unwrap();
    let calls: Vec<&Value> = contents
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .filter(|p| p.get("functionCall").is_some())
        .collect();
    let responses: Vec<&Value> = contents
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .filter(|p| p.get("functionResponse").is_some())
        .collect();
    assert_eq!(calls.len(), 2, "{gemini:#}");
    assert_eq!(responses.len(), 2);
    assert_eq!(calls[0]["functionCall"]["args"], json!({"path": "a.txt"}));
    assert_eq!(calls[1]["functionCall"]["args"], json!({"path": "b.txt"}));
    assert!(responses[0]["functionResponse"]["response"]["content"]
        .as_str()
        .unwrap()
        .contains("alpha"));
    assert!(responses[1]["functionResponse"]["response"]["content"]
        .as_str()
        .unwrap()
        .contains("beta"));
    assert!(!contains_text(gemini, "SIG-ANTHROPIC-X"));
    assert!(!contains_text(gemini, "Now b."), "reasoning is not sent");
    assert!(!contains_text(gemini, "thoughtSignature"));
    // Its second request sends its own signature back, on its own call.
    let gemini2 = &recorded[5].body;
    assert!(contains_text(gemini2, "SIG-GEMINI-X"));
    assert!(!contains_text(gemini2, "SIG-ANTHROPIC-X"));

    // The final OpenAI request: all three calls, each followed by its result, no private data.
    let openai = &recorded[6].body;
    let mut ids = Vec::new();
    let messages = openai["messages"].as_array().unwrap();
    for (i, m) in messages.iter().enumerate() {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let id = call["id"].as_str().unwrap().to_owned();
            assert!(
                messages[i + 1..]
                    .iter()
                    .any(|l| l["role"] == "tool" && l["tool_call_id"] == id.as_str()),
                "{id} unanswered in {openai:#}"
            );
            ids.push(id);
        }
    }
    assert_eq!(
        ids,
        vec!["call_o1".to_owned(), "toolu_b".to_owned(), gemini_call]
    );
    assert!(!contains_text(openai, "SIG-ANTHROPIC-X"));
    assert!(!contains_text(openai, "SIG-GEMINI-X"));
    assert!(!contains_text(openai, "_anthropic") && !contains_text(openai, "_gemini"));
    // And Anthropic never saw Gemini's signature (it came later), nor the OpenAI one theirs.
    for r in &recorded[..4] {
        assert!(!contains_text(&r.body, "SIG-GEMINI-X"));
    }

    // Usage per model: each total is the sum of that model's requests only.
    let load = t.load_session(&sid).await;
    let usage = load["usage"].as_array().expect("usage totals").clone();
    assert_eq!(
        usage,
        vec![
            json!({"model": "gpt", "inputTokens": 410, "outputTokens": 19, "cachedTokens": 0}),
            json!({"model": "claude", "inputTokens": 2100, "outputTokens": 26, "cachedTokens": 0}),
            json!({"model": "gemini", "inputTokens": 1020, "outputTokens": 10, "cachedTokens": 0}),
        ],
        "{load:#}"
    );
    let usage_events: Vec<(String, u64)> = t
        .events_of_type(&sid, "usage")
        .iter()
        .map(|e| {
            (
                e["model"].as_str().unwrap().to_owned(),
                e["inputTokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        usage_events,
        vec![
            ("gpt".to_owned(), 100),
            ("gpt".to_owned(), 110),
            ("claude".to_owned(), 1000),
            ("claude".to_owned(), 1100),
            ("gemini".to_owned(), 500),
            ("gemini".to_owned(), 520),
            ("gpt".to_owned(), 200),
        ]
    );

    // The totals are the stored ones: a second process restores the same numbers.
    let t2 = t.respawn().await;
    t2.initialize().await;
    let reloaded = t2.load_session(&sid).await;
    assert_eq!(reloaded["usage"].as_array().unwrap(), &usage);
}

/// A switch inside a running tool loop: the Anthropic request that continues an OpenAI
/// model's tool call has no thinking block to lead it, so it goes without thinking.
#[tokio::test]
async fn a_switch_inside_a_tool_loop_sends_anthropic_no_thinking_it_would_refuse() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    let gate = Gate::new();
    mock.push(
        Script::new()
            .role()
            .tool_call("call_1", "read_file", r#"{"path":"a.txt"}"#)
            .wait_for(&gate)
            .finish("tool_calls")
            .usage(10, 1)
            .done(),
    );
    mock.push(Script::text_reply("done"));
    let t = start(&mock, "gpt").await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "read").await;
    gate.wait_reached().await;
    t.switch_model(&sid, "claude").await;
    gate.open();
    completed(&t, &sid, &turn).await;
    let recorded = mock.recorded();
    assert_eq!(recorded[1].dialect, Dialect::Anthropic);
    assert!(recorded[1].rejected.is_none(), "{:?}", recorded[1].rejected);
    assert!(
        recorded[1].body.get("thinking").is_none(),
        "{:#}",
        recorded[1].body
    );
}

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const PDF: &str = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK";

/// An image and a PDF in one prompt, then the same history sent to models that can and cannot
/// take them: natively where supported, a placeholder naming the file otherwise, decided again
/// at every call, never changed in history.
#[tokio::test]
async fn images_and_pdfs_go_natively_or_as_placeholders_per_model() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let t = start(&mock, "claude").await;
    let sid = t.new_session(ws.path()).await;
    let content = json!([
        {"type": "text", "text": "Compare these."},
        {"type": "image", "mimeType": "image/png", "data": PNG},
        {"type": "document", "mimeType": "application/pdf", "data": PDF, "name": "spec.pdf"},
    ]);

    // Claude: image and document blocks.
    mock.push(Script::new().text("Seen.").finish("stop").done());
    let turn = t.prompt_content(&sid, content).await;
    completed(&t, &sid, &turn).await;
    let blocks = mock.request(0)["messages"][0]["content"].clone();
    assert_eq!(blocks[1]["type"], "image");
    assert_eq!(
        blocks[1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": PNG})
    );
    assert_eq!(blocks[2]["type"], "document");
    assert_eq!(
        blocks[2]["source"],
        json!({"type": "base64", "media_type": "application/pdf", "data": PDF})
    );
    assert_eq!(blocks[2]["title"], "spec.pdf");

    // A blind OpenAI-compatible model: both become placeholders; the switch warns about both.
    let switched = t.switch_model(&sid, "gpt").await;
    let warning = switched["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("image") && warning.contains("PDF"),
        "{switched}"
    );
    mock.push(Script::text_reply("Blind."));
    let turn = t.prompt(&sid, "Again?").await;
    completed(&t, &sid, &turn).await;
    let first_user = mock.request(1)["messages"][1].clone();
    let text = first_user["content"]
        .as_str()
        .expect("text only")
        .to_owned();
    assert!(text.contains("cannot view images"), "{text}");
    assert!(
        text.contains("\"spec.pdf\"") && text.contains("cannot read it"),
        "{text}"
    );
    assert!(!text.contains(PNG) && !text.contains(PDF));

    // Images only: the image goes as a data URL, the PDF stays a placeholder.
    t.switch_model(&sid, "mock-vision").await;
    mock.push(Script::text_reply("Half."));
    let turn = t.prompt(&sid, "And now?").await;
    completed(&t, &sid, &turn).await;
    let parts = mock.request(2)["messages"][1]["content"].clone();
    assert_eq!(
        parts[1]["image_url"]["url"],
        format!("data:image/png;base64,{PNG}")
    );
    assert!(parts[2]["text"].as_str().unwrap().contains("\"spec.pdf\""));

    // gpt-4o reads PDFs (catalog): a `file` part with a data URL.
    t.switch_model(&sid, "gpt-4o").await;
    mock.push(Script::text_reply("Both."));
    let turn = t.prompt(&sid, "Once more").await;
    completed(&t, &sid, &turn).await;
    let parts = mock.request(3)["messages"][1]["content"].clone();
    assert_eq!(parts[2]["type"], "file");
    assert_eq!(parts[2]["file"]["filename"], "spec.pdf");
    assert_eq!(
        parts[2]["file"]["file_data"],
        format!("data:application/pdf;base64,{PDF}")
    );

    // Gemini: both as inlineData.
    t.switch_model(&sid, "gemini").await;
    mock.push(Script::new().text("Gemini sees.").finish("stop").done());
    let turn = t.prompt(&sid, "Gemini?").await;
    completed(&t, &sid, &turn).await;
    let parts = mock.request(4)["contents"][0]["parts"].clone();
    assert_eq!(
        parts[1]["inlineData"],
        json!({"mimeType": "image/png", "data": PNG})
    );
    assert_eq!(
        parts[2]["inlineData"],
        json!({"mimeType": "application/pdf", "data": PDF})
    );

    // History kept both all along.
    let load = t.load_session(&sid).await;
    let prompt = &load["messages"][0];
    assert_eq!(prompt["images"][0]["data"], PNG);
    assert_eq!(
        prompt["documents"][0],
        json!({"mimeType": "application/pdf", "data": PDF, "name": "spec.pdf"})
    );

    // Only PDFs are documents.
    let err = t
        .request_err(
            "prompt",
            json!({"sessionId": sid, "content": [{"type": "document", "mimeType": "text/plain", "data": "aGk="}]}),
        )
        .await;
    assert_eq!(err.code, -32602, "{err:?}");
    assert!(err.message.contains("application/pdf"), "{err:?}");
}

#[tokio::test]
async fn a_missing_api_key_is_a_clear_error_naming_the_variable() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    // Only the Gemini key is set; the Anthropic variable is absent.
    let t = Tandem::start_with(
        TandemOptions::new()
            .config(config(&mock, "claude"))
            .env(GEMINI_KEY_VAR, GEMINI_KEY),
    )
    .await;
    t.initialize().await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "hello").await;
    let events = t.wait_turn(&sid, &turn).await;
    let end = events.last().unwrap();
    assert_eq!(end["reason"], "error", "{end}");
    let message = end["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(ANTHROPIC_KEY_VAR) && message.contains("api_key_env"),
        "{message}"
    );
    assert_eq!(end["error"]["retriable"], false);
    assert!(
        !t.events_of_type(&sid, "notice")
            .iter()
            .any(|n| n["kind"] == "retrying"),
        "a missing key is not retried"
    );
    assert!(mock.recorded().is_empty(), "nothing was sent without a key");
    // Said at start-up too, by name.
    assert!(
        t.stderr().contains(ANTHROPIC_KEY_VAR),
        "{}",
        t.stderr_tail()
    );

    // With the key in place, a Gemini turn works and the key never reaches the logs.
    t.switch_model(&sid, "gemini").await;
    mock.push(Script::new().text("hi").finish("stop").done());
    let turn = t.prompt(&sid, "hello again").await;
    completed(&t, &sid, &turn).await;
    assert!(!t.stderr().contains(GEMINI_KEY), "the API key was logged");
    assert!(!t
        .messages()
        .iter()
        .any(|m| m.to_string().contains(GEMINI_KEY)));
}

#[tokio::test]
async fn initialize_and_models_list_report_the_catalog() {
    let mock = MockLlm::start().await;
    let t = Tandem::start_with(TandemOptions::new().config(config(&mock, "gpt"))).await;
    let init = t.initialize().await;
    assert_eq!(init["capabilities"]["documentPrompts"], true);
    let listed = t.request_ok("models/list", json!({})).await;
    assert_eq!(listed["models"], init["models"]);
    assert_eq!(listed["defaultModel"], "gpt");
    let model = |id: &str| {
        listed["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing from {listed}"))
            .clone()
    };
    assert_eq!(
        model("claude"),
        json!({"id": "claude", "provider": "claude", "name": "claude-sonnet-4-5",
               "contextWindow": 200000, "maxOutputTokens": 64000, "vision": true, "pdf": true,
               "reasoning": true, "parallelToolCalls": true})
    );
    assert_eq!(
        model("gemini"),
        json!({"id": "gemini", "provider": "google", "name": "gemini-2.5-flash",
               "contextWindow": 1048576, "maxOutputTokens": 65536, "vision": true, "pdf": true,
               "reasoning": true, "parallelToolCalls": true})
    );
    assert_eq!(
        model("gpt"),
        json!({"id": "gpt", "provider": "local", "name": "mock-model",
               "contextWindow": 128000, "vision": false, "pdf": false,
               "reasoning": false, "parallelToolCalls": true})
    );
    assert_eq!(model("mock-vision")["vision"], true);
    assert_eq!(model("mock-vision")["pdf"], false);
}

#[tokio::test]
async fn anthropic_overload_is_retried_and_a_bad_request_is_not() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::new().step(Step::HttpError {
        status: 529,
        body: json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string(),
        retry_after: None,
    }));
    mock.push(
        Script::new()
            .tool_call("toolu_r", "read_file", r#"{"path":"a.txt"}"#)
            .finish("tool_calls")
            .done(),
    );
    mock.push(Script::new().text("Back.").finish("stop").done());
    let t = start(&mock, "claude").await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "hi").await;
    let events = completed(&t, &sid, &turn).await;
    let retry = events
        .iter()
        .find(|e| e["type"] == "notice" && e["kind"] == "retrying")
        .expect("a retry notice");
    assert!(retry["text"].as_str().unwrap().contains("Overloaded"));

    mock.push(Script::new().step(Step::HttpError {
        status: 400,
        body: json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 300000 tokens > 200000 maximum"}}).to_string(),
        retry_after: None,
    }));
    // A context overflow compacts: the summarizing request and the retried request follow.
    mock.push(Script::new().text("They said hi.").finish("stop").done());
    mock.push(Script::new().text("Fits now.").finish("stop").done());
    let turn = t.prompt(&sid, "hello again").await;
    let events = completed(&t, &sid, &turn).await;
    assert!(
        types(&events).contains(&"compacted"),
        "{:?}",
        types(&events)
    );
    // The summarizing request offers no tools, so the earlier call is written out as text
    // (Anthropic refuses tool blocks in a request without tools; the mock does too).
    let recorded = mock.recorded();
    let summary = &recorded[recorded.len() - 2];
    assert!(summary.rejected.is_none(), "{:?}", summary.rejected);
    assert!(summary.body.get("tools").is_none());
    assert!(contains_text(&summary.body, "[called tool read_file"));

    mock.push(Script::new().step(Step::HttpError {
        status: 401,
        body: json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}).to_string(),
        retry_after: None,
    }));
    let before = mock.recorded().len();
    let turn = t.prompt(&sid, "third").await;
    let events = t.wait_turn(&sid, &turn).await;
    let end = events.last().unwrap();
    assert_eq!(end["reason"], "error");
    assert_eq!(end["error"]["retriable"], false);
    assert!(end["error"]["message"]
        .as_str()
        .unwrap()
        .contains("invalid x-api-key"));
    assert_eq!(mock.recorded().len(), before + 1, "not retried");
}

/// The vendors' own SDKs (`anthropic`, `google-genai` on PyPI) parse the mock's streams into
/// the expected text, reasoning, tool calls, signatures and usage, so the mock the tests above
/// rely on speaks the real formats. The SDKs are installed by `tests/sdk/setup`; without them
/// this test fails and says so.
#[tokio::test]
async fn the_vendor_sdks_parse_the_mock_streams() {
    let venv = std::env::var_os("TANDEM_SDK_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .expect("a home directory")
                .join(".cache/tandem/sdk-venv")
        });
    let python = venv.join("bin/python");
    let installed = std::process::Command::new(&python)
        .args(["-c", "import anthropic, google.genai"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        installed,
        "the vendor SDKs (anthropic, google-genai) are not installed at {}; run tests/sdk/setup first",
        venv.display()
    );

    let mock = MockLlm::start().await;
    // The Anthropic script, then the Gemini script (taken in that order by check.py).
    mock.push(
        Script::new()
            .reasoning("Think ")
            .reasoning("first.")
            .signature("SIG-A")
            .text("Reading ")
            .text("a.txt.")
            .tool_call("toolu_sdk", "read_file", r#"{"path":"a.txt","limit":5}"#)
            .finish("tool_calls")
            .usage_cached(1500, 33, 1000)
            .done(),
    );
    mock.push(
        Script::new()
            .reasoning("Pondering.")
            .text("Reading.")
            .signature("c2lnLWdlbWluaQ==")
            .tool_call("x", "read_file", r#"{"path":"a.txt"}"#)
            .finish("tool_calls")
            .usage(70, 9)
            .done(),
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/check.py");
    let output = tokio::process::Command::new(&python)
        .arg(&script)
        .env("MOCK_ROOT", mock.root_url())
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("all_proxy")
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(120), output)
        .await
        .expect("check.py finished in time")
        .expect("run check.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "check.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Value = serde_json::from_str(stdout.trim()).expect("check.py prints JSON");

    let recorded = mock.recorded();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].dialect, Dialect::Anthropic);
    assert_eq!(recorded[1].dialect, Dialect::Gemini);

    let a = &parsed["anthropic"];
    assert_eq!(a["streamedText"], "Reading a.txt.");
    assert_eq!(a["blocks"], json!(["thinking", "text", "tool_use"]));
    assert_eq!(a["text"], "Reading a.txt.");
    assert_eq!(
        a["thinking"],
        json!([{"thinking": "Think first.", "signature": "SIG-A"}])
    );
    assert_eq!(
        a["toolUses"],
        json!([{"id": "toolu_sdk", "name": "read_file", "input": {"path": "a.txt", "limit": 5}}])
    );
    assert_eq!(a["stopReason"], "tool_use");
    assert_eq!(
        a["usage"],
        json!({"input": 500, "output": 33, "cacheRead": 1000})
    );

    let g = &parsed["gemini"];
    assert_eq!(g["text"], "Reading.");
    assert_eq!(g["thoughts"], "Pondering.");
    assert_eq!(
        g["calls"],
        json!([{"name": "read_file", "args": {"path": "a.txt"}}])
    );
    assert_eq!(g["signatures"], json!(["c2lnLWdlbWluaQ=="]));
    assert_eq!(g["finishReason"], "STOP");
    assert_eq!(g["usage"], json!({"prompt": 70, "candidates": 9}));
}

/// Streams that break (a reset connection for Anthropic, a body that ends before any
/// `finishReason` for Gemini) are retried from a clean request, and the text the user already
/// saw is not shown twice.
#[tokio::test]
async fn native_streams_cut_short_are_retried_without_repeating_text() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let t = start(&mock, "claude").await;
    let sid = t.new_session(ws.path()).await;
    for (model, cut) in [
        ("claude", Script::new().text("Hel").disconnect()),
        ("gemini", Script::new().text("Hel")),
    ] {
        t.switch_model(&sid, model).await;
        mock.push(cut);
        mock.push(Script::new().text("Hello there.").finish("stop").done());
        let turn = t.prompt(&sid, "greet").await;
        let events = completed(&t, &sid, &turn).await;
        let shown: String = events
            .iter()
            .filter(|e| e["type"] == "assistantDelta")
            .filter_map(|e| e["text"].as_str())
            .collect();
        assert_eq!(shown, "Hello there.", "{model}");
        let message = events
            .iter()
            .find(|e| e["type"] == "assistantMessage")
            .unwrap();
        assert_eq!(message["text"], "Hello there.", "{model}");
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "notice" && e["kind"] == "retrying"),
            "{model}: {:?}",
            types(&events)
        );
    }
    let dialects: Vec<Dialect> = mock.recorded().iter().map(|r| r.dialect).collect();
    assert_eq!(
        dialects,
        vec![
            Dialect::Anthropic,
            Dialect::Anthropic,
            Dialect::Gemini,
            Dialect::Gemini
        ]
    );
}

/// `stop` while a native stream is open keeps the text already shown and closes the connection.
#[tokio::test]
async fn stop_during_a_native_stream_closes_it_and_keeps_the_shown_text() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let t = start(&mock, "gemini").await;
    let sid = t.new_session(ws.path()).await;
    for model in ["gemini", "claude"] {
        t.switch_model(&sid, model).await;
        let gate = Gate::new();
        mock.push(
            Script::new()
                .text("Partial answer")
                .wait_for(&gate)
                .text(" never seen")
                .finish("stop")
                .done(),
        );
        let turn = t.prompt(&sid, "talk").await;
        t.wait_event(&sid, |e| {
            e["type"] == "assistantDelta" && e["turnId"] == turn.as_str()
        })
        .await;
        gate.wait_reached().await;
        assert!(t.stop(&sid).await, "{model}");
        let events = t.wait_turn(&sid, &turn).await;
        assert_eq!(events.last().unwrap()["reason"], "interrupted", "{model}");
        let message = events
            .iter()
            .find(|e| e["type"] == "assistantMessage")
            .unwrap();
        assert_eq!(message["text"], "Partial answer", "{model}");
    }
    mock.wait_for_cancelled(2).await;
}
