//! What the user trusted per workspace folder: the `.mcp.json` servers and the project hooks,
//! each bound to the SHA-256 of the file content that was trusted (issue 27). Kept apart from
//! sessions: trust belongs to the folder.

use super::*;

impl Store {
    /// Remember that the user trusted workspace MCP server `server` of folder `cwd`, bound to
    /// `definition` (the `.mcp.json` file's content key); resolves once it is committed.
    pub async fn trust_mcp(
        &self,
        cwd: &str,
        server: &str,
        definition: &str,
        trusted_at: u64,
    ) -> Result<(), StoreError> {
        let (cwd, server, definition) = (cwd.to_owned(), server.to_owned(), definition.to_owned());
        self.ask(|reply| Command::TrustMcp {
            cwd,
            server,
            definition,
            trusted_at,
            reply,
        })
        .await
    }

    /// The workspace MCP servers of folder `cwd` the user trusted: `(server, definition)`.
    pub async fn trusted_mcp(&self, cwd: &str) -> Result<Vec<(String, String)>, StoreError> {
        let cwd = cwd.to_owned();
        self.ask(|reply| Command::TrustedMcp { cwd, reply }).await
    }

    /// Remember that the user trusted the project hooks of folder `cwd` as hashed to
    /// `content_hash`; resolves once it is committed.
    pub async fn trust_hooks(
        &self,
        cwd: &str,
        content_hash: &str,
        trusted_at: u64,
    ) -> Result<(), StoreError> {
        let (cwd, content_hash) = (cwd.to_owned(), content_hash.to_owned());
        self.ask(|reply| Command::TrustHooks {
            cwd,
            content_hash,
            trusted_at,
            reply,
        })
        .await
    }

    /// The content hash of the project hooks of folder `cwd` the user trusted last, if any.
    pub async fn trusted_hooks(&self, cwd: &str) -> Result<Option<String>, StoreError> {
        let cwd = cwd.to_owned();
        self.ask(|reply| Command::TrustedHooks { cwd, reply }).await
    }
}
