//! Fuzz target: arbitrary bytes, delivered in arbitrary read sizes, through the stdio frame
//! decoder and the JSON-RPC envelope. Nothing may panic, and every frame must classify.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem::server::framing::Frame;
use tandem::server::rpc::{decode, Incoming};

fuzz_target!(|data: &[u8]| {
    tandem::server::framing::fuzz_one(data, |frame| {
        if let Frame::Message(bytes) = frame {
            // Classification must never panic, whatever the bytes.
            match decode(&bytes) {
                Incoming::Request { .. }
                | Incoming::Notification { .. }
                | Incoming::Response
                | Incoming::Invalid { .. } => {}
            }
        }
    });
});
