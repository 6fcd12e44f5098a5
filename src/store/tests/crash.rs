//! Store tests with a real crash: a child process that writes and is killed with SIGKILL, and
//! what a new store finds afterwards.

use super::*;

/// Not a test on its own: the child half of `a_killed_process_loses_nothing_it_acknowledged`.
/// It writes forever and prints `ack <i>` from the after-commit callback of message `i`.
#[test]
fn crash_child_writer() {
    let Some(path) = std::env::var_os(CRASH_ENV) else {
        return;
    };
    let store = Store::open(Path::new(&path)).unwrap();
    store.create_session(session("s1", "/w", 1));
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    // Bounded, so a parent that fails before killing it does not leave a runaway writer.
    for i in 0u64..50_000 {
        let durability = if i % 10 == 0 {
            Durability::Full
        } else {
            Durability::Normal
        };
        store.append_message(
            "s1",
            &format!("m{i}"),
            Some("t1"),
            "assistant",
            format!("[{i}]"),
            durability,
        );
        let tx = tx.clone();
        store.record_event(
            "s1",
            i + 1,
            Some("t1"),
            "assistantMessage",
            Some(format!("[{i}]")),
            Some(Box::new(move || {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "ack {i}");
                let _ = out.flush();
                let _ = tx.send(());
            })),
        );
        // Keep the queue short so the kill lands while batches are being committed.
        if i % 20 == 19 {
            for _ in 0..20 {
                let _ = rx.recv();
            }
        }
    }
}

#[tokio::test]
async fn a_killed_process_loses_nothing_it_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_file(&dir);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store::tests::crash::crash_child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_ENV, &path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked: Option<u64> = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("ack ") {
            acked = Some(n.parse().unwrap());
            if acked >= Some(2_000) {
                // SIGKILL: no destructor, no final commit.
                child.kill().unwrap();
                break;
            }
        }
    }
    child.wait().unwrap();
    let acked = acked.expect("the child acknowledged nothing");
    assert!(acked >= 2_000, "the child stopped early at {acked}");

    let store = Store::open(&path).unwrap();
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
    let loaded = store.load_session("s1").await.unwrap().unwrap();
    assert!(
        loaded.messages.len() as u64 > acked,
        "lost messages: {} <= {acked}",
        loaded.messages.len()
    );
    assert!(
        loaded.last_seq > acked,
        "lost events: {} <= {acked}",
        loaded.last_seq
    );
    for (i, json) in loaded.messages.iter().enumerate() {
        assert_eq!(json, &format!("[{i}]"), "history out of order at {i}");
    }
    eprintln!(
        "store: child killed after ack {acked}; {} messages survived",
        loaded.messages.len()
    );
}
