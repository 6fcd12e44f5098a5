//! What the library records of each request for the benchmarks: the instant its first byte
//! arrived (before the rest of it), and, only when asked for, its body bytes exactly as sent.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic with its message is the failure report"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tandem_mock_llm::{MockLlm, Script};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Spacing and key order that re-serializing the parsed JSON would not reproduce.
const BODY: &str = "{\"stream\": true,  \"model\":\"mock-model\",\n \"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

/// Sends one chat-completions request in two writes `pause` apart: the first two bytes of the
/// request line, then the rest. Returns the instants just before each write.
async fn send_in_two_parts(mock: &MockLlm, pause: Duration) -> (Instant, Instant) {
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let mut stream = TcpStream::connect(mock.addr()).await.unwrap();
    let first_write = Instant::now();
    stream.write_all(&request.as_bytes()[..2]).await.unwrap();
    stream.flush().await.unwrap();
    tokio::time::sleep(pause).await;
    let second_write = Instant::now();
    stream.write_all(&request.as_bytes()[2..]).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "unexpected answer: {}",
        String::from_utf8_lossy(&answer)
    );
    (first_write, second_write)
}

#[tokio::test]
async fn the_first_byte_instant_and_the_raw_body_are_recorded_when_asked_for() {
    let seen_by_responder = Arc::new(Mutex::new(Vec::new()));
    let seen = seen_by_responder.clone();
    let mock = MockLlm::builder()
        .keep_raw_bodies()
        .responder(move |request| {
            seen.lock()
                .unwrap()
                .push((request.raw_body.to_vec(), request.first_byte_at));
            Script::text_reply("ok")
        })
        .start()
        .await
        .unwrap();
    let pause = Duration::from_millis(300);
    let (first_write, second_write) = send_in_two_parts(&mock, pause).await;

    let recorded = mock.recorded();
    assert_eq!(recorded.len(), 1);
    let record = &recorded[0];
    // The first byte was readable after the first write and before the rest was sent: the
    // instant is not the end of the request.
    assert!(
        record.first_byte_at >= first_write && record.first_byte_at < second_write,
        "first byte at {:?} after the first write, the second write {:?} after it",
        record.first_byte_at - first_write,
        second_write - first_write
    );
    assert_eq!(
        record.raw_body.as_deref(),
        Some(BODY.as_bytes()),
        "the raw body is the bytes as sent, not the JSON re-serialized"
    );
    assert_eq!(record.body["model"], "mock-model");
    let seen = seen_by_responder.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, BODY.as_bytes());
    assert_eq!(seen[0].1, record.first_byte_at);
    assert_eq!(mock.recorded_since(1).len(), 0);
    assert_eq!(mock.recorded_since(0).len(), 1);
    assert_eq!(mock.recorded_since(5).len(), 0);
}

#[tokio::test]
async fn without_asking_no_copy_of_the_body_is_kept() {
    let mock = MockLlm::builder()
        .when_empty(Script::text_reply("ok"))
        .start()
        .await
        .unwrap();
    send_in_two_parts(&mock, Duration::from_millis(1)).await;
    let recorded = mock.recorded();
    assert_eq!(recorded.len(), 1);
    assert!(recorded[0].raw_body.is_none());
    assert_eq!(recorded[0].body["messages"][0]["content"], "hi");
}
