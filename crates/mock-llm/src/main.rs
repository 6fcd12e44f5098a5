//! `tandem-mock-llm`: the mock LLM as a program, for test suites that are not written in Rust
//! (the Neovim and VS Code suites).
//!
//! ```text
//! tandem-mock-llm [--script RESPONSES.json] [--log REQUESTS.jsonl] [--port 0] [--stream-requests]
//! ```
//!
//! It listens on 127.0.0.1 (`--port`, default 0: a free port), prints the port as its first
//! stdout line and serves every dialect (chat completions, Anthropic, Gemini, Responses) plus
//! `GET /v1/models` and the control endpoints under `/_mock/` until it is killed. `--script`
//! queues responses in the JSON form (see the library's `json_script` module); `--log` appends
//! each model request's body as one JSON line before answering. When the queue is empty it
//! answers a normal stream with the text `(mock: no scripted response left)`, as the Python
//! mock the Neovim suite used to run did, so an extra request shows in the chat instead of
//! failing the turn. A script it cannot read is an error naming the response and step, and a
//! non-zero exit before the port line.
//!
//! With `--stream-requests`, every change to the record of a model request follows on stdout as
//! one JSON line, `{"index": I, "request": {dialect, method, path, headers, body, scripted,
//! rejected, aborted, finished}}`: when it arrives (written before its answer starts) and when it
//! ends. A client that mirrors these lines knows of a request before the program under test can
//! see its answer, which a long-poll of `GET /_mock/requests` cannot promise (between two polls
//! nothing is listening).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line program: its port line on stdout and its errors on stderr are the point"
)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use tandem_mock_llm::{json_script, MockLlm, Script};

const USAGE: &str = "usage: tandem-mock-llm [--script RESPONSES.json] [--log REQUESTS.jsonl] [--port PORT] [--stream-requests]";

/// The text of the answer to a request the queue does not cover.
const EMPTY_QUEUE_TEXT: &str = "(mock: no scripted response left)";

struct Args {
    script: Option<PathBuf>,
    log: Option<PathBuf>,
    port: u16,
    stream_requests: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        script: None,
        log: None,
        port: 0,
        stream_requests: false,
    };
    let mut it = std::env::args_os().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match arg.to_str() {
            Some("--script") => args.script = Some(PathBuf::from(value("--script")?)),
            Some("--log") => args.log = Some(PathBuf::from(value("--log")?)),
            Some("--port") => {
                let port = value("--port")?;
                args.port = port
                    .to_str()
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| format!("--port needs a port number, got {port:?}"))?;
            }
            Some("--stream-requests") => args.stream_requests = true,
            Some("-h" | "--help") => return Err(USAGE.to_owned()),
            _ => return Err(format!("unknown argument {arg:?}\n{USAGE}")),
        }
    }
    Ok(args)
}

/// Reads and checks the script file before anything listens, so a bad script fails the suite
/// at once with its place named.
fn read_script(path: &PathBuf) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the script {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("the script {} is not JSON: {e}", path.display()))
}

async fn run() -> Result<(), String> {
    let args = parse_args()?;
    let responses = args.script.as_ref().map(read_script).transpose()?;
    // Checked with throwaway gates first, so the error comes before the port line.
    if let Some(responses) = &responses {
        json_script::parse_responses(responses, &mut |_| Default::default(), 1).map_err(|e| {
            let path = args.script.as_deref().unwrap_or(std::path::Path::new(""));
            format!("the script {}: {e}", path.display())
        })?;
    }
    // Framed like a scripted `[{"text": …}]` response: one text delta, `stop`, the per-request usage.
    let empty_queue_answer = json_script::parse_responses(
        &serde_json::json!([[{ "text": EMPTY_QUEUE_TEXT }]]),
        &mut |_| Default::default(),
        1,
    )
    .ok()
    .and_then(|mut scripts| scripts.pop())
    .unwrap_or_else(|| Script::text_reply(EMPTY_QUEUE_TEXT));
    let mut builder = MockLlm::builder()
        .serve_model_list()
        .when_empty(empty_queue_answer);
    if let Some(log) = args.log {
        builder = builder.request_log(log);
    }
    // The port line must come first: the hook only runs for requests, which need the port.
    if args.stream_requests {
        builder = builder.on_record(|index, request| {
            let line = serde_json::json!({"index": index, "request": request.to_json()});
            let mut out = std::io::stdout().lock();
            // A reader that went away is the end of the test that started us, not an error here.
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        });
    }
    let mock = builder
        .start_on(args.port)
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", args.port))?;
    if let Some(responses) = &responses {
        mock.push_json(responses).map_err(|e| e.to_string())?;
    }
    println!("{}", mock.addr().port());
    // Serve until killed; SIGTERM and Ctrl-C end it cleanly.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    drop(mock);
    Ok(())
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tandem-mock-llm: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tandem-mock-llm: {e}");
            ExitCode::from(2)
        }
    }
}
