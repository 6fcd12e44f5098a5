//! Model-facing names of MCP tools: `mcp__<server>__<tool>`, with every byte outside
//! `[A-Za-z0-9_-]` replaced by `_` (every vendor accepts that alphabet), cut to 64 bytes with a
//! hash suffix when longer (OpenAI's limit), and made unique within a session.
//!
//! Invariants: a name is a pure function of (server, tool) unless two tools collide after
//! cleaning, in which case the later one (in server order, then tool order) gets the hash suffix
//! too, so no two tools of a session ever share a name.

/// The prefix of every MCP tool's model-facing name; built-in tools never start with it.
pub const PREFIX: &str = "mcp__";

/// The most bytes of a tool name every vendor accepts.
pub const MAX_NAME_BYTES: usize = 64;

fn clean(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// FNV-1a over the server and tool names as given (not the cleaned ones, so two tools that
/// clean to the same text still hash apart); 8 hex digits.
fn short_hash(server: &str, tool: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.bytes().chain([0]).chain(tool.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", hash as u32)
}

/// `mcp__<server>__<tool>`, cleaned and cut (see the module docs).
pub fn model_name(server: &str, tool: &str) -> String {
    let name = format!("{PREFIX}{}__{}", clean(server), clean(tool));
    if name.len() <= MAX_NAME_BYTES {
        return name;
    }
    hashed(&name, server, tool)
}

/// `name` cut to leave room for `_` and the hash of (server, tool).
fn hashed(name: &str, server: &str, tool: &str) -> String {
    let suffix = short_hash(server, tool);
    // Cleaned names are ASCII, so any byte index is a character boundary.
    let keep = MAX_NAME_BYTES - suffix.len() - 1;
    format!("{}_{suffix}", &name[..keep.min(name.len())])
}

/// The name for (server, tool) that is not in `taken`: [`model_name`], or the same with the
/// hash suffix when another tool already cleaned to it.
pub fn unique_model_name(server: &str, tool: &str, taken: &dyn Fn(&str) -> bool) -> String {
    let name = model_name(server, tool);
    if !taken(&name) {
        return name;
    }
    hashed(&name, server, tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_clean_short_and_unique() {
        assert_eq!(model_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(
            model_name("my docs", "search.v2"),
            "mcp__my_docs__search_v2"
        );
        let long = model_name(&"s".repeat(40), &"t".repeat(40));
        assert_eq!(long.len(), MAX_NAME_BYTES);
        assert!(long.starts_with("mcp__ssss"));
        // Two long names that share their first 55 bytes still differ.
        let other = model_name(&"s".repeat(40), &format!("{}u", "t".repeat(40)));
        assert_ne!(long, other);
        // `a.b` and `a_b` clean to the same name; the second gets the hash.
        let first = model_name("srv", "a.b");
        let second = unique_model_name("srv", "a_b", &|n| n == first);
        assert_ne!(first, second);
        assert!(second.len() <= MAX_NAME_BYTES);
        assert!(second
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}
