//! A seeded storm of malformed frames against the real binary: truncated JSON, invalid UTF-8
//! split across writes, NUL bytes, wrong-typed ids, methods and params, 10,000-deep nesting,
//! frames over the cap, batches and one-byte writes. Every frame gets the right error, the
//! server never stops reading, and its memory stays flat.

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

/// One malformed frame and the error it must get: (bytes without the newline, code, kind,
/// whether the response carries the frame's id).
fn malformed(rng: &mut SplitMix, n: usize) -> (Vec<u8>, i64, &'static str, bool) {
    let id = format!("f{n}");
    let valid = json!({"jsonrpc":"2.0","id":id,"method":"steer","params":{"sessionId":"s_x","text":"hello"}})
        .to_string();
    match rng.below(12) {
        0 => {
            // Truncated JSON.
            let cut = 1 + rng.below(valid.len() as u64 - 2) as usize;
            (
                valid.as_bytes()[..cut].to_vec(),
                -32700,
                "parseError",
                false,
            )
        }
        1 => {
            // Invalid UTF-8 inside a string.
            let mut bytes = valid.clone().into_bytes();
            let at = valid.find("hello").unwrap();
            bytes[at] = 0xff;
            bytes[at + 1] = 0xfe;
            (bytes, -32700, "parseError", false)
        }
        2 => {
            // A raw NUL byte inside a string.
            let mut bytes = valid.clone().into_bytes();
            let at = valid.find("hello").unwrap();
            bytes[at + 2] = 0;
            (bytes, -32700, "parseError", false)
        }
        3 => {
            let ids = [json!({}), json!([1]), json!(true), json!(1.5e300)];
            let bad = ids[rng.below(3) as usize].clone();
            let frame = json!({"jsonrpc":"2.0","id":bad,"method":"stop","params":{}});
            (
                frame.to_string().into_bytes(),
                -32600,
                "invalidRequest",
                false,
            )
        }
        4 => {
            let methods = [json!(7), json!(null), json!(["stop"]), json!({"m":1})];
            let bad = methods[rng.below(4) as usize].clone();
            let frame = json!({"jsonrpc":"2.0","id":id,"method":bad});
            (
                frame.to_string().into_bytes(),
                -32600,
                "invalidRequest",
                true,
            )
        }
        5 => {
            let params = [json!("x"), json!(5), json!(true)];
            let bad = params[rng.below(3) as usize].clone();
            let frame = json!({"jsonrpc":"2.0","id":id,"method":"stop","params":bad});
            (
                frame.to_string().into_bytes(),
                -32600,
                "invalidRequest",
                true,
            )
        }
        6 => {
            let frame = json!({"jsonrpc":"2.0","id":id,"method":"stop","params":["s_x"]});
            (
                frame.to_string().into_bytes(),
                -32602,
                "invalidParams",
                true,
            )
        }
        7 => {
            let frame = json!({"jsonrpc":"2.0","id":id,"method":format!("nope/{n}"),"params":{}});
            (
                frame.to_string().into_bytes(),
                -32601,
                "methodNotFound",
                true,
            )
        }
        8 => {
            let frame = json!({"jsonrpc":"2.0","id":id,"method":"prompt","params":{"sessionId":5,"content":[{"type":"video"}]}});
            (
                frame.to_string().into_bytes(),
                -32602,
                "invalidParams",
                true,
            )
        }
        9 => {
            let depth = 10_000;
            let open = if rng.below(2) == 0 { "[" } else { "{\"a\":" };
            let close = if open == "[" { "]" } else { "}" };
            let frame = format!("{}{}", open.repeat(depth), close.repeat(depth));
            (frame.into_bytes(), -32700, "parseError", false)
        }
        10 => {
            let frame = json!([{"jsonrpc":"2.0","id":id,"method":"stop"}]);
            (
                frame.to_string().into_bytes(),
                -32600,
                "invalidRequest",
                false,
            )
        }
        _ => {
            let frame = json!({"jsonrpc":"1.0","id":id,"method":"stop"});
            (
                frame.to_string().into_bytes(),
                -32600,
                "invalidRequest",
                true,
            )
        }
    }
}

#[tokio::test]
async fn a_thousand_malformed_frames_get_errors_and_the_server_keeps_serving() {
    let mock = MockLlm::start().await;
    let t = Tandem::start(&mock).await;
    let mut rng = SplitMix(0xF00D_5EED);
    let mut baseline = None;
    let frames = 1_200;
    for n in 0..frames {
        let (mut bytes, code, kind, has_id) = malformed(&mut rng, n);
        bytes.push(b'\n');
        // Writes are split at random points, sometimes into single bytes, so a frame (and a
        // UTF-8 sequence) often arrives across several reads.
        match rng.below(4) {
            0 => {
                for byte in bytes.iter().take(300) {
                    t.send_raw(std::slice::from_ref(byte)).await;
                }
                t.send_raw(&bytes[bytes.len().min(300)..]).await;
            }
            1 => {
                let cut = rng.below(bytes.len() as u64) as usize;
                t.send_raw(&bytes[..cut]).await;
                t.send_raw(&bytes[cut..]).await;
            }
            _ => t.send_raw(&bytes).await,
        }
        let reply = t.next_raw_message().await;
        assert_eq!(
            reply["error"]["code"], code,
            "frame {n} ({kind}) got {reply}"
        );
        assert_eq!(reply["error"]["data"]["kind"], kind, "frame {n}: {reply}");
        if has_id {
            assert_eq!(reply["id"], format!("f{n}"), "frame {n}: {reply}");
        } else {
            assert_eq!(reply["id"], Value::Null, "frame {n}: {reply}");
        }
        if n == 100 {
            baseline = t.rss_kib().await;
        }
        if n % 100 == 99 {
            // Still reading and answering real requests.
            let ok = t.request_ok("session/list", json!({})).await;
            assert!(ok["sessions"].is_array());
        }
    }
    // Two frames over the 16 MiB cap are skipped without being held in memory.
    for _ in 0..2 {
        let mut huge = vec![b' '; 17 * 1024 * 1024];
        huge.push(b'\n');
        t.send_raw(&huge).await;
        let reply = t.next_raw_message().await;
        assert_eq!(reply["error"]["data"]["kind"], "frameTooLarge", "{reply}");
    }
    let end = t.rss_kib().await;
    let (Some(baseline), Some(end)) = (baseline, end) else {
        panic!("cannot read the server's memory from /proc");
    };
    // Flat: a frame of 17 MiB was never held, and 1,200 errors leaked nothing of note.
    assert!(
        end < baseline + 8 * 1024,
        "memory grew from {baseline} KiB to {end} KiB over {frames} malformed frames"
    );
    let ws = workspace();
    mock.push(Script::text_reply("still fine"));
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "are you alive?").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    eprintln!(
        "fuzz_frames: {frames} malformed frames + 2 oversized, RSS {baseline} KiB -> {end} KiB"
    );
    t.shutdown().await;
}
