//! The JSON form of scripts, read by the `tandem-mock-llm` binary from its `--script` file and by
//! the control endpoint `POST /_mock/enqueue`: a JSON list of responses, each one the answer to
//! one model request, in queue order.
//!
//! A response is either a list of steps, or an object:
//!
//! ```json
//! {"steps": [...], "usage": {"prompt_tokens": 10, "completion_tokens": 5},
//!  "status": 500, "body": {"error": {"message": "..."}}, "retry_after": 3,
//!  "hold_head_until": "GATE", "exact": false}
//! ```
//!
//! (every key optional; `status` answers that HTTP status with `body` instead of a stream).
//!
//! A step is an object with one of these keys:
//!
//! | step | meaning |
//! | --- | --- |
//! | `{"text": "…"}` | an assistant text delta |
//! | `{"reasoning": "…"}` | a reasoning delta |
//! | `{"signature": "…"}` | a reasoning signature (Anthropic, Gemini) |
//! | `{"tool_call": {"id", "name", "arguments"}}` | one tool call; `arguments` is an object or a string of JSON (default `{}`), `id` defaults to `call_N_I` (N: the response's 1-based number among all queued, I: the call's index in it) |
//! | `{"tool_arguments": {"index", "piece"}}` | more arguments for a started call |
//! | `{"finish": "stop"}` | the finish reason (`stop`, `tool_calls`, `length`, `content_filter`) |
//! | `{"usage": {"prompt_tokens", "completion_tokens", "cached_tokens"}}` | usage |
//! | `{"delay_ms": N}` | a pause; ends early when the client hangs up |
//! | `{"wait": "GATE"}` | a pause until the gate is opened (`POST /_mock/gates/GATE/open`) |
//! | `{"deltas": {"count", "pace_ms", "tag"}}` | numbered text deltas |
//! | `{"disconnect": true}` | reset the connection |
//! | `{"raw": "…"}` | bytes written verbatim into the body |
//! | `{"role": true}`, `{"done": true}` | the role chunk and `[DONE]` (for `exact` responses) |
//! | `{"http_error": {"status", "body", "retry_after"}}` | an HTTP error instead of a stream (first step only) |
//! | `{"plain": {"status", "content_type", "body"}}` | any plain answer instead of a stream (first step only) |
//!
//! Unless a response is `exact`, it is framed like a real stream, as the Python mock the Neovim
//! suite used did: a role chunk first, a finish reason at the end when none was given
//! (`tool_calls` after a tool call, else `stop`), usage when none was given (prompt tokens 100 +
//! the request's 1-based number, completion tokens one per word of text + 1), then `[DONE]`.
//! An unknown step or key is an error naming the response and step. An empty object stands for
//! an empty list wherever a list is expected (Lua's JSON encoder writes `{}` for both).

use std::fmt;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::script::{Gate, Script, Step};

/// A script the JSON form cannot express: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    /// 0-based index of the response in the list.
    pub response: usize,
    /// 0-based index of the step in the response, when a step is at fault.
    pub step: Option<usize>,
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            Some(step) => write!(
                f,
                "response {}, step {step}: {}",
                self.response, self.message
            ),
            None => write!(f, "response {}: {}", self.response, self.message),
        }
    }
}

impl std::error::Error for ScriptError {}

/// The step keys the JSON form knows, for the error that names an unknown one.
const STEP_KEYS: &str = "text, reasoning, signature, tool_call, tool_arguments, finish, usage, \
                         delay_ms, wait, deltas, disconnect, raw, role, done, http_error, plain";

/// The response keys the object form knows.
const RESPONSE_KEYS: &str = "steps, usage, status, body, retry_after, hold_head_until, exact";

/// Reads a JSON list of responses into scripts. `gate` gives the gate of a name; `first_number`
/// is the 1-based number of the first response among all ever queued (for default call ids).
pub fn parse_responses(
    value: &Value,
    gate: &mut dyn FnMut(&str) -> Gate,
    first_number: usize,
) -> Result<Vec<Script>, ScriptError> {
    // Lua's JSON encoder (the Neovim suite's) writes an empty list as `{}`.
    let nothing = Vec::new();
    let list = match value {
        Value::Object(map) if map.is_empty() => Some(&nothing),
        other => other.as_array(),
    };
    let Some(list) = list else {
        return Err(ScriptError {
            response: 0,
            step: None,
            message: format!(
                "a script is a JSON list of responses, got {}",
                kind_of(value)
            ),
        });
    };
    list.iter()
        .enumerate()
        .map(|(i, response)| parse_response(response, i, first_number + i, gate))
        .collect()
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn parse_response(
    value: &Value,
    response: usize,
    number: usize,
    gate: &mut dyn FnMut(&str) -> Gate,
) -> Result<Script, ScriptError> {
    let err = |message: String| ScriptError {
        response,
        step: None,
        message,
    };
    let empty = Map::new();
    let (steps, options) = match value {
        Value::Array(steps) => (steps.as_slice(), &empty),
        Value::Object(map) => {
            if let Some(key) = map
                .keys()
                .find(|k| !RESPONSE_KEYS.split(", ").any(|known| known == k.as_str()))
            {
                return Err(err(format!(
                    "unknown response key `{key}` (known: {RESPONSE_KEYS})"
                )));
            }
            let steps = match map.get("steps") {
                None => &[][..],
                Some(Value::Array(steps)) => steps.as_slice(),
                // Lua's empty list again.
                Some(Value::Object(map)) if map.is_empty() => &[][..],
                Some(other) => {
                    return Err(err(format!("`steps` is a list, got {}", kind_of(other))))
                }
            };
            (steps, map)
        }
        other => {
            return Err(err(format!(
                "a response is a list of steps or an object, got {}",
                kind_of(other)
            )))
        }
    };

    if let Some(status) = options.get("status") {
        let status = as_status(status).map_err(err)?;
        let body = match options.get("body") {
            None => json!({"error": {"message": "mock provider error"}}).to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let retry_after = options
            .get("retry_after")
            .map(|v| {
                v.as_u64()
                    .map(|n| n as u32)
                    .ok_or("`retry_after` is a number of seconds")
            })
            .transpose()
            .map_err(|m| err(m.to_owned()))?;
        return Ok(Script::from_steps(vec![Step::HttpError {
            status,
            body,
            retry_after,
        }]));
    }

    let mut script = Script::new();
    let mut tool_calls = 0u32;
    for (i, step) in steps.iter().enumerate() {
        let parsed =
            parse_step(step, number, &mut tool_calls, gate).map_err(|message| ScriptError {
                response,
                step: Some(i),
                message,
            })?;
        script = script.step(parsed);
    }
    if let Some(name) = options.get("hold_head_until") {
        let name = name
            .as_str()
            .ok_or_else(|| err("`hold_head_until` is a gate name".to_owned()))?;
        script.head_gate = Some(gate(name));
    }
    let exact = match options.get("exact") {
        None => false,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| err("`exact` is true or false".to_owned()))?,
    };
    let usage = options
        .get("usage")
        .map(parse_usage)
        .transpose()
        .map_err(err)?;
    let plain = matches!(
        script.steps.first(),
        Some(Step::HttpError { .. } | Step::Plain { .. })
    );
    if !exact && !plain {
        script = frame(script, usage);
    } else if let Some(usage) = usage {
        script = script.step(usage);
    }
    script.check().map_err(err)?;
    Ok(script)
}

/// Adds what a real stream has around the given steps (see the module's docs).
fn frame(script: Script, usage: Option<Step>) -> Script {
    let has = |f: fn(&Step) -> bool| script.steps.iter().any(f);
    let has_role = has(|s| matches!(s, Step::Role));
    let has_finish = has(|s| matches!(s, Step::Finish(_)));
    let has_usage = has(|s| {
        matches!(
            s,
            Step::Usage { .. } | Step::UsageCached { .. } | Step::UsageForRequest { .. }
        )
    });
    let has_done = has(|s| matches!(s, Step::Done));
    let has_tool_call = has(|s| matches!(s, Step::ToolCall { .. }));
    let words: u64 = script
        .steps
        .iter()
        .map(|s| match s {
            Step::Text(t) => t.split_whitespace().count().max(1) as u64,
            _ => 0,
        })
        .sum();

    let mut framed = Script {
        steps: Vec::with_capacity(script.steps.len() + 4),
        head_gate: script.head_gate,
    };
    if !has_role {
        framed.steps.push(Step::Role);
    }
    framed.steps.extend(script.steps);
    if !has_finish {
        let reason = if has_tool_call { "tool_calls" } else { "stop" };
        framed.steps.push(Step::Finish(reason.to_owned()));
    }
    match usage {
        Some(usage) => framed.steps.push(usage),
        None if !has_usage => framed.steps.push(Step::UsageForRequest {
            prompt_base: 100,
            completion: words + 1,
        }),
        None => {}
    }
    if !has_done {
        framed.steps.push(Step::Done);
    }
    framed
}

fn as_status(v: &Value) -> Result<u16, String> {
    v.as_u64()
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (100..=599).contains(n))
        .ok_or_else(|| format!("`status` is an HTTP status code, got {v}"))
}

fn parse_usage(v: &Value) -> Result<Step, String> {
    let field = |name: &str| -> Result<u64, String> {
        match v.get(name) {
            None => Ok(0),
            Some(n) => n
                .as_u64()
                .ok_or_else(|| format!("usage `{name}` is a whole number, got {n}")),
        }
    };
    if !v.is_object() {
        return Err(format!("usage is an object, got {}", kind_of(v)));
    }
    let (prompt, completion, cached) = (
        field("prompt_tokens")?,
        field("completion_tokens")?,
        field("cached_tokens")?,
    );
    Ok(if cached > 0 {
        Step::UsageCached {
            prompt,
            completion,
            cached,
        }
    } else {
        Step::Usage { prompt, completion }
    })
}

fn parse_step(
    step: &Value,
    number: usize,
    tool_calls: &mut u32,
    gate: &mut dyn FnMut(&str) -> Gate,
) -> Result<Step, String> {
    let Some(map) = step.as_object() else {
        return Err(format!("a step is an object, got {}", kind_of(step)));
    };
    let mut keys = map.keys();
    let (Some(key), None) = (keys.next(), keys.next()) else {
        return Err(format!(
            "a step has exactly one key (one of: {STEP_KEYS}), got {}",
            Value::Object(map.clone())
        ));
    };
    let v = &map[key];
    let string = |what: &str| -> Result<String, String> {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("`{what}` is a string, got {}", kind_of(v)))
    };
    let number_at = |obj: &Value, name: &str| -> Result<Option<u64>, String> {
        obj.get(name)
            .map(|n| {
                n.as_u64()
                    .ok_or_else(|| format!("`{key}.{name}` is a whole number, got {n}"))
            })
            .transpose()
    };
    Ok(match key.as_str() {
        "text" => Step::Text(string("text")?),
        "reasoning" => Step::Reasoning(string("reasoning")?),
        "signature" => Step::Signature(string("signature")?),
        "finish" => Step::Finish(string("finish")?),
        "raw" => Step::Raw(string("raw")?),
        "wait" => Step::WaitFor(gate(&string("wait")?)),
        "role" => Step::Role,
        "done" => Step::Done,
        "disconnect" => Step::Disconnect,
        "delay_ms" => Step::Delay(Duration::from_millis(
            v.as_u64()
                .ok_or_else(|| format!("`delay_ms` is a whole number, got {v}"))?,
        )),
        "usage" => parse_usage(v)?,
        "tool_call" => {
            let name = v
                .get("name")
                .and_then(Value::as_str)
                .ok_or("`tool_call.name` is required (a string)")?;
            let index = *tool_calls;
            *tool_calls += 1;
            let id = match v.get("id") {
                None => format!("call_{number}_{index}"),
                Some(Value::String(id)) => id.clone(),
                Some(other) => return Err(format!("`tool_call.id` is a string, got {other}")),
            };
            let args_json = match v.get("arguments") {
                None => "{}".to_owned(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            Step::ToolCall {
                index,
                id,
                name: name.to_owned(),
                args_json,
            }
        }
        "tool_arguments" => Step::ToolArguments {
            index: number_at(v, "index")?.unwrap_or(0) as u32,
            json_piece: v
                .get("piece")
                .and_then(Value::as_str)
                .ok_or("`tool_arguments.piece` is required (a string)")?
                .to_owned(),
        },
        "deltas" => Step::Deltas(crate::script::Deltas {
            count: number_at(v, "count")?.ok_or("`deltas.count` is required")? as usize,
            pace: number_at(v, "pace_ms")?.map(Duration::from_millis),
            tag: v.get("tag").and_then(Value::as_str).map(str::to_owned),
        }),
        "http_error" => Step::HttpError {
            status: as_status(v.get("status").unwrap_or(&Value::Null))?,
            body: match v.get("body") {
                None => json!({"error": {"message": "mock provider error"}}).to_string(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            },
            retry_after: number_at(v, "retry_after")?.map(|n| n as u32),
        },
        "plain" => Step::Plain {
            status: as_status(v.get("status").unwrap_or(&Value::Null))?,
            content_type: v
                .get("content_type")
                .and_then(Value::as_str)
                .unwrap_or("application/json")
                .to_owned(),
            body: match v.get("body") {
                None => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            },
        },
        other => return Err(format!("unknown step `{other}` (known: {STEP_KEYS})")),
    })
}
