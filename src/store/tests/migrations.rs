//! Store tests of the schema and of opening a database: migrations from every earlier version,
//! a newer version refused, files that are no database and paths that cannot be opened.

use super::*;

#[tokio::test]
async fn migrations_create_the_schema_and_set_user_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_file(&dir);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.path(), Some(path.as_path()));
    store.barrier(Durability::Normal).await.unwrap();

    let conn = Connection::open(&path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, schema::MIGRATIONS.len() as i64);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let mut tables = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    tables.sort();
    assert_eq!(
        tables,
        [
            "checkpoint_blobs",
            "checkpoint_files",
            "checkpoint_scans",
            "events",
            "hook_trust",
            "mcp_trust",
            "messages",
            "meta",
            "pending",
            "rules",
            "sessions",
            "superseded_messages",
            "tool_runs",
            "usage"
        ]
    );
    drop(store);

    // Opening again runs no migration twice and keeps the version.
    let store = Store::open(&path).unwrap();
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, schema::MIGRATIONS.len() as i64);
}

#[tokio::test]
async fn a_version_2_database_gains_the_network_choice_and_keeps_its_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_file(&dir);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    {
        // A database as tandem wrote it before migration 3 existed.
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        tx.execute_batch(schema::MIGRATIONS[0]).unwrap();
        tx.execute_batch(schema::MIGRATIONS[1]).unwrap();
        tx.pragma_update(None, "user_version", 2).unwrap();
        tx.execute(
            "INSERT INTO sessions (id, cwd, model, mode, created_at, updated_at)
             VALUES ('old', '/w', 'mock', 'ask', 1, 1)",
            [],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let old = store.load_session("old").await.unwrap().unwrap();
    assert!(!old.record.allow_network, "the default is no network");
    store.set_network("old", true);
    let mut fresh = session("new", "/w", 2);
    fresh.allow_network = true;
    store.create_session(fresh);
    store.barrier(Durability::Normal).await.unwrap();
    drop(store);
    let store = Store::open(&path).unwrap();
    assert!(
        store
            .load_session("old")
            .await
            .unwrap()
            .unwrap()
            .record
            .allow_network
    );
    assert!(
        store
            .load_session("new")
            .await
            .unwrap()
            .unwrap()
            .record
            .allow_network
    );
    store.set_network("old", false);
    store.barrier(Durability::Normal).await.unwrap();
    assert!(
        !store
            .load_session("old")
            .await
            .unwrap()
            .unwrap()
            .record
            .allow_network
    );
}

#[tokio::test]
async fn a_version_4_database_keeps_the_acp_reject_always_rules_as_deny_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_file(&dir);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    {
        // Rules as the ACP face stored them before the engine owned deny rules.
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for migration in &schema::MIGRATIONS[..4] {
            tx.execute_batch(migration).unwrap();
        }
        tx.pragma_update(None, "user_version", 4).unwrap();
        tx.execute(
            "INSERT INTO sessions (id, cwd, model, mode, created_at, updated_at)
             VALUES ('old', '/w', 'mock', 'ask', 1, 1)",
            [],
        )
        .unwrap();
        for (kind, value) in [
            ("tool", "write_file"),
            ("acpDenyTool", "edit_file"),
            ("acpDenyCommandPrefix", "cargo publish"),
        ] {
            tx.execute(
                "INSERT INTO rules (session_id, kind, value) VALUES ('old', ?1, ?2)",
                [kind, value],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let mut rules: Vec<(String, String)> = store
        .load_session("old")
        .await
        .unwrap()
        .unwrap()
        .rules
        .into_iter()
        .map(|r| (r.kind, r.value))
        .collect();
    rules.sort();
    assert_eq!(
        rules,
        [
            ("denyCommandPrefix".to_owned(), "cargo publish".to_owned()),
            ("denyTool".to_owned(), "edit_file".to_owned()),
            ("tool".to_owned(), "write_file".to_owned()),
        ]
    );
    for (kind, _) in &rules {
        assert!(
            kind.parse::<crate::permissions::RuleKind>().is_ok(),
            "{kind} is a kind the engine reads"
        );
    }
}

#[tokio::test]
async fn a_database_from_a_newer_tandem_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tandem.sqlite3");
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let err = Store::open(&path).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    assert!(err.to_string().contains("newer tandem"), "{err}");
}

#[test]
fn a_file_that_is_not_a_database_is_reported_as_unusable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tandem.sqlite3");
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    let err = Store::open(&path).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    assert!(err.to_string().contains("move the file aside"), "{err}");
}

#[test]
fn an_unopenable_path_names_the_path_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let path = file.join("tandem.sqlite3");
    let err = Store::open(&path).err().unwrap();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("--data-dir"), "{text}");
}
