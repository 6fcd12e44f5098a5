//! A loopback listener that counts the connections it accepts: the hostile-output and sandbox
//! tests point network attempts at it, so "nothing got out" is a count of zero, not a timeout.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;

pub struct Canary {
    pub port: u16,
    hits: Arc<AtomicUsize>,
}

impl Canary {
    pub async fn start() -> Canary {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the canary on loopback");
        let port = listener.local_addr().expect("canary address").port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let mut sink = Vec::new();
                let _ =
                    tokio::time::timeout(Duration::from_millis(200), socket.read_to_end(&mut sink))
                        .await;
            }
        });
        Canary { port, hits }
    }

    /// Connections accepted so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// A bash line that connects to the canary and says whether it could.
    pub fn connect_command(&self) -> String {
        format!(
            "(exec 3<>/dev/tcp/127.0.0.1/{}) 2>/dev/null && echo net-open || echo net-refused",
            self.port
        )
    }
}
