//! The fuzz corpus of the frame decoder (fuzz/corpus/frames), kept as regression tests: every
//! input runs through the decoder and the envelope exactly as the fuzz target does.

use std::path::Path;

use tandem::server::framing::{fuzz_one, Frame};
use tandem::server::rpc::{decode, Incoming};

#[test]
fn every_corpus_input_decodes_without_panicking() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/frames");
    let mut inputs = 0;
    let mut frames = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/frames exists") {
        let data = std::fs::read(entry.expect("corpus entry").path()).expect("read corpus input");
        inputs += 1;
        fuzz_one(&data, |frame| {
            frames += 1;
            if let Frame::Message(bytes) = frame {
                // A frame is never larger than the 4 KiB cap the fuzz reader uses.
                assert!(bytes.len() <= 4096);
                let _: Incoming = decode(&bytes);
            }
        });
    }
    assert!(inputs >= 5, "the corpus lost its seeds");
    assert!(
        frames >= inputs,
        "decoded {frames} frames from {inputs} inputs"
    );
}

#[test]
fn the_seed_frames_classify_as_expected() {
    let mut seen = Vec::new();
    fuzz_one(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"stop\",\"params\":{}}\n[1]\n{oops\n",
        |frame| seen.push(frame),
    );
    assert_eq!(seen.len(), 3);
    let kinds: Vec<&str> = seen
        .iter()
        .map(|f| match f {
            Frame::Message(b) => match decode(b) {
                Incoming::Request { .. } => "request",
                Incoming::Invalid { .. } => "invalid",
                _ => "other",
            },
            Frame::TooLarge => "too large",
            Frame::Malformed(_) => "malformed",
        })
        .collect();
    assert_eq!(kinds, vec!["request", "invalid", "invalid"]);
}
