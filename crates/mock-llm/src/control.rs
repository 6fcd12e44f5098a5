//! The control endpoints under `/_mock/`, for a process that drives the mock from outside (the
//! editor suites through the `tandem-mock-llm` binary):
//!
//! - `POST /_mock/enqueue` with a JSON list of responses (see `json_script.rs`) appends them to
//!   the queue; answers `{"queued": N}` (N: how many are waiting now), or a 400 naming the
//!   response and step at fault.
//! - `DELETE /_mock/queue` drops every response still queued and answers `{"dropped": N}`: a
//!   suite that shares one mock across tests drains it after each test, so a test whose waits
//!   ended before its turn took its responses fails itself instead of feeding its answers to the
//!   next test.
//! - `POST /_mock/gates/NAME/open` opens the gate `NAME` (scripts pause on it with
//!   `{"wait": "NAME"}`); opening is permanent, so it may come before the stream gets there.
//! - `GET /_mock/gates/NAME[?min_reached=N&timeout_ms=T]` answers `{"open", "reached"}`, waiting
//!   up to `T` ms until `N` streams have paused there.
//! - `GET /_mock/requests[?min=N][&changed_since=V][&timeout_ms=T]` answers `{"version",
//!   "requests": [{dialect, method, path, headers, body, scripted, rejected, aborted, finished}],
//!   "queued"}`, waiting up to `T` ms (default 0) until there are at least `N` requests and the
//!   state's version is past `V`: a client awaits a condition instead of sleeping. The answer at
//!   the timeout is the state then; the client checks it.
//!
//! Control requests are not recorded and never take a script.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::net::TcpStream;

use crate::http::{write_plain, HttpRequest};
use crate::json_script::{parse_responses, ScriptError};
use crate::Shared;

/// The longest a long-poll may wait, whatever it asks: a client that wants longer asks again.
const LONGEST_WAIT: Duration = Duration::from_secs(60);

pub(crate) async fn handle(
    stream: &mut TcpStream,
    shared: &Arc<Shared>,
    req: &HttpRequest,
    rest: &str,
) {
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let param = |name: &str| -> Option<u64> {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.parse().ok())
    };
    let timeout = Duration::from_millis(param("timeout_ms").unwrap_or(0)).min(LONGEST_WAIT);
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let (status, body) = match (req.method.as_str(), segments.as_slice()) {
        ("POST", ["enqueue"]) => match serde_json::from_slice::<Value>(&req.body) {
            Err(e) => (400, json!({"error": format!("the body is not JSON: {e}")})),
            Ok(responses) => match enqueue_json(shared, &responses) {
                Ok(queued) => (200, json!({"queued": queued})),
                Err(e) => (400, json!({"error": e.to_string()})),
            },
        },
        ("DELETE", ["queue"]) => {
            let dropped = shared.update(|st| std::mem::take(&mut st.queue).len());
            (200, json!({"dropped": dropped}))
        }
        ("POST", ["gates", name, "open"]) => {
            shared.gate_named(name).open();
            (200, json!({"open": true}))
        }
        ("GET", ["gates", name]) => {
            let gate = shared.gate_named(name);
            let min_reached = param("min_reached").unwrap_or(0) as usize;
            let mut reached = gate.reached_receiver();
            let _ = tokio::time::timeout(timeout, reached.wait_for(|n| *n >= min_reached)).await;
            (
                200,
                json!({"open": gate.is_open(), "reached": gate.reached_count()}),
            )
        }
        ("GET", ["requests"]) => {
            let min = param("min").unwrap_or(0) as usize;
            let changed_since = param("changed_since");
            let mut version = shared.version.subscribe();
            let wanted = |v: u64| changed_since.is_none_or(|since| v > since);
            let _ = tokio::time::timeout(timeout, async {
                loop {
                    let v = *version.borrow_and_update();
                    if wanted(v) && shared.lock().requests.len() >= min {
                        return;
                    }
                    if version.changed().await.is_err() {
                        return;
                    }
                }
            })
            .await;
            // Read the version first: a change after it shows up as a newer one next time.
            let v = *shared.version.borrow();
            let st = shared.lock();
            let requests: Vec<Value> = st.requests.iter().map(|r| r.to_json()).collect();
            (
                200,
                json!({"version": v, "requests": requests, "queued": st.queue.len()}),
            )
        }
        _ => (
            404,
            json!({"error": format!("no control endpoint {} /_mock/{path}", req.method)}),
        ),
    };
    let _ = write_plain(stream, status, "application/json", &body.to_string(), None).await;
}

/// Parses responses in the JSON form and queues them; how many are waiting afterwards.
pub(crate) fn enqueue_json(shared: &Shared, responses: &Value) -> Result<usize, ScriptError> {
    let first_number = shared.lock().responses_queued + 1;
    let scripts = parse_responses(responses, &mut |name| shared.gate_named(name), first_number)?;
    Ok(shared.update(|st| {
        st.responses_queued += scripts.len();
        st.queue.extend(scripts);
        st.queue.len()
    }))
}
