//! What the model reads of an MCP tool's result: text blocks as they are, embedded text
//! resources as text under their URI, images as image parts (the engine degrades them per
//! model like any image), and a line for what cannot be shown (audio, blobs, links). The text
//! is capped like `read_file`'s output, with a note saying what was cut.
//!
//! Invariants: the output is bounded (text at [`MAX_TEXT_BYTES`], at most [`MAX_IMAGES`] images
//! of at most [`MAX_IMAGE_BYTES`] each) whatever the server sent; `isError` stays a flag the
//! engine turns into a failed tool result, never an error of tandem's.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The most bytes of text one result gives the model (the same as a `read_file` page).
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// The most images one result gives the model.
pub const MAX_IMAGES: usize = 4;
/// The most base64 bytes of one image (about 3.75 MB decoded).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// An image an MCP tool returned, base64 as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpImage {
    pub mime_type: String,
    pub data: String,
}

/// A tool result as the model gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpOutput {
    pub text: String,
    pub images: Vec<McpImage>,
    /// The server said the call failed (`isError`); its text says why.
    pub is_error: bool,
}

/// Collects text under the cap, remembering how much was left out.
struct CappedText {
    text: String,
    dropped: usize,
}

impl CappedText {
    fn push(&mut self, piece: &str) {
        if !self.text.is_empty() {
            self.push_raw("\n");
        }
        self.push_raw(piece);
    }

    fn push_raw(&mut self, piece: &str) {
        let room = MAX_TEXT_BYTES.saturating_sub(self.text.len());
        if piece.len() <= room {
            self.text.push_str(piece);
            return;
        }
        let mut cut = room;
        while !piece.is_char_boundary(cut) {
            cut -= 1;
        }
        self.text.push_str(&piece[..cut]);
        self.dropped += piece.len() - cut;
    }
}

/// The image types every vendor's API takes.
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Whether an image can go to a model: a type every vendor takes, and data that is base64
/// (standard alphabet, padded), as the vendors require.
fn sendable_image(mime_type: &str, data: &str) -> bool {
    let base64 = !data.is_empty()
        && data.len().is_multiple_of(4)
        && data
            .trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        && data.len() - data.trim_end_matches('=').len() <= 2;
    IMAGE_TYPES.contains(&mime_type) && base64
}

/// The model's view of `result`.
pub fn output(result: CallToolResult) -> McpOutput {
    let mut text = CappedText {
        text: String::new(),
        dropped: 0,
    };
    let mut images = Vec::new();
    let mut images_left_out = 0usize;
    let empty = result.content.is_empty();
    for block in result.content {
        match block {
            ContentBlock::Text(t) => text.push(&t.text),
            ContentBlock::Image(image) if !sendable_image(&image.mime_type, &image.data) => {
                // A provider refuses the whole request for an image it cannot read, and the
                // history would carry it into every later request: never pass one on.
                text.push(&format!(
                    "[an image the server called {:?}, not shown: only PNG, JPEG, GIF and WebP in base64 reach the model]",
                    image.mime_type.chars().take(64).collect::<String>()
                ));
            }
            ContentBlock::Image(image) => {
                if images.len() < MAX_IMAGES && image.data.len() <= MAX_IMAGE_BYTES {
                    text.push(&format!("[image {} {}]", images.len() + 1, image.mime_type));
                    images.push(McpImage {
                        mime_type: image.mime_type,
                        data: image.data,
                    });
                } else {
                    images_left_out += 1;
                }
            }
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents {
                    uri, text: body, ..
                } => {
                    text.push(&format!("[resource {uri}]\n{body}"));
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => text.push(&format!(
                    "[resource {uri}: {} of {} bytes (base64), not shown]",
                    mime_type.as_deref().unwrap_or("binary data"),
                    blob.len()
                )),
                _ => text.push("[a resource of a kind tandem does not know, not shown]"),
            },
            ContentBlock::Audio(audio) => text.push(&format!(
                "[audio {} of {} bytes (base64), not shown: tandem passes no audio to models]",
                audio.mime_type,
                audio.data.len()
            )),
            ContentBlock::ResourceLink(link) => {
                text.push(&format!("[resource link {} ({})]", link.uri, link.name))
            }
            // A block of a newer MCP version: say so rather than drop it silently.
            _ => text.push("[a content block of a kind tandem does not know, not shown]"),
        }
    }
    if empty {
        if let Some(structured) = result.structured_content {
            text.push(&structured.to_string());
        }
    }
    // The notes go after the cap, so the model always learns what it did not get.
    let mut text_out = text.text;
    if images_left_out > 0 {
        text_out.push_str(&format!(
            "\n[{images_left_out} more image(s) not shown: at most {MAX_IMAGES} images of up to {MAX_IMAGE_BYTES} bytes each per result]"
        ));
    }
    if text.dropped > 0 {
        text_out.push_str(&format!(
            "\n[output cut: {} more bytes not shown (at most {MAX_TEXT_BYTES} bytes of text per result); ask the tool for less]",
            text.dropped
        ));
    }
    McpOutput {
        text: text_out,
        images,
        is_error: result.is_error == Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_images_and_resources_become_what_the_model_reads() {
        let out = output(result(json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.md", "text": "# A"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA", "mimeType": "application/octet-stream"}}
        ], "isError": false})));
        assert_eq!(
            out.text,
            "hello\n[image 1 image/png]\n[resource file:///a.md]\n# A\n[resource file:///b.bin: application/octet-stream of 4 bytes (base64), not shown]"
        );
        assert_eq!(
            out.images,
            vec![McpImage {
                mime_type: "image/png".into(),
                data: "aGk=".into()
            }]
        );
        assert!(!out.is_error);
        let failed = output(result(
            json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}),
        ));
        assert!(failed.is_error);
        let structured = output(result(
            json!({"content": [], "structuredContent": {"n": 1}}),
        ));
        assert_eq!(structured.text, "{\"n\":1}");
    }

    #[test]
    fn output_is_bounded_whatever_the_server_sends() {
        let big = "é".repeat(MAX_TEXT_BYTES);
        let images: Vec<_> = (0..10)
            .map(|_| json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}))
            .collect();
        let mut content = vec![json!({"type": "text", "text": big})];
        content.extend(images);
        let out = output(result(json!({ "content": content })));
        assert!(out.text.len() < MAX_TEXT_BYTES + 300, "{}", out.text.len());
        assert!(out.text.contains("output cut"));
        assert_eq!(out.images.len(), MAX_IMAGES);
        assert!(out.text.contains("6 more image(s) not shown"));
    }

    #[test]
    fn an_image_no_vendor_takes_never_reaches_the_model() {
        let out = output(result(json!({"content": [
            {"type": "image", "data": "PHN2Zz4=", "mimeType": "image/svg+xml"},
            {"type": "image", "data": "not base64!", "mimeType": "image/png"},
            {"type": "image", "data": "aGk", "mimeType": "image/jpeg"},
            {"type": "image", "data": "aGk=", "mimeType": "image/webp"}
        ]})));
        assert_eq!(out.images.len(), 1, "{}", out.text);
        assert_eq!(out.images[0].mime_type, "image/webp");
        assert_eq!(
            out.text
                .matches("not shown: only PNG, JPEG, GIF and WebP")
                .count(),
            3
        );
    }
}
