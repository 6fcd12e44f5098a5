//! Where the session database lives, and the data directory made ready before anything is served.

use std::path::{Path, PathBuf};

use super::StoreError;

/// The data directory made absolute (against the current directory), created, and
/// canonical (links resolved), before anything is served: tandem protects it from the agent by
/// that path from the first op on, and the shell sandbox mounts it read-only by it. A relative
/// `--data-dir state` or one reached through a symlinked parent would otherwise be protected
/// under a spelling the checks never see (and a relative mount breaks every sandboxed command).
pub fn prepare_data_dir(data_dir: Option<&Path>) -> Result<PathBuf, StoreError> {
    let database = default_database_path(data_dir);
    let dir = database
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let open_error = |source: std::io::Error| StoreError::Open {
        path: database.clone(),
        source: Box::new(source),
    };
    let absolute = if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir().map_err(open_error)?.join(dir)
    };
    std::fs::create_dir_all(&absolute).map_err(open_error)?;
    std::fs::canonicalize(&absolute).map_err(open_error)
}

/// Where the database lives: `data_dir/tandem.sqlite3` when a data dir is given (`--data-dir`
/// or `TANDEM_HOME`), else the platform data directory, else `./.tandem/`.
pub fn default_database_path(data_dir: Option<&Path>) -> PathBuf {
    const FILE: &str = "tandem.sqlite3";
    match data_dir {
        Some(dir) => dir.join(FILE),
        None => match dirs::data_dir() {
            Some(dir) => dir.join("tandem").join(FILE),
            None => PathBuf::from(".tandem").join(FILE),
        },
    }
}
