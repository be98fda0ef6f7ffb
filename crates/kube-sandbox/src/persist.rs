//! Durable storage for the sandbox: one SQLite database (WAL mode) per state directory.
//!
//! The in-memory [`Store`](super::store::Store) is the source of truth while the server runs;
//! every write goes through here first (write-through), so a crash or restart loses nothing
//! that was acknowledged. The global resourceVersion counter is stored too, so versions keep
//! increasing across restarts even after deletes.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

/// Errors of the persistence layer.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// Filesystem problem with the state directory.
    #[error("state directory {path}: {cause}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error (part of the message, not a `source`, so chains don't repeat it).
        cause: std::io::Error,
    },
    /// Another sandbox already uses this state directory.
    #[error(
        "state directory {0} is in use by another `kubectl meta sandbox`; stop it or pick another --state directory"
    )]
    Locked(PathBuf),
    /// SQLite failed.
    #[error("state database: {0}")]
    Sqlite(rusqlite::Error),
}

// Not `#[from]`: that would also expose the cause as `source()`, and the message already has it.
impl From<rusqlite::Error> for PersistError {
    fn from(e: rusqlite::Error) -> Self {
        PersistError::Sqlite(e)
    }
}

/// One stored row, as loaded at start-up.
#[derive(Debug)]
pub struct Row {
    /// Storage key of the resource (`apps/deployments`).
    pub gr: String,
    /// Namespace ("" for cluster-scoped).
    pub ns: String,
    /// Object name.
    pub name: String,
    /// The object's JSON.
    pub data: Vec<u8>,
}

/// Everything in a state directory.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Highest resourceVersion ever handed out.
    pub rv: u64,
    /// All objects.
    pub rows: Vec<Row>,
}

/// An open state database, holding the directory lock.
pub struct Db {
    conn: Connection,
    _lock: File,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Db")
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PersistError + '_ {
    move |cause| PersistError::Io {
        path: path.to_path_buf(),
        cause,
    }
}

/// Create `dir` (0700) if needed.
pub fn ensure_private_dir(dir: &Path) -> Result<(), PersistError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))
}

impl Db {
    /// Open (or create) the database in `dir`, lock the directory, and load everything.
    pub fn open(dir: &Path) -> Result<(Db, Loaded), PersistError> {
        ensure_private_dir(dir)?;
        let lock_path = dir.join("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(PersistError::Locked(dir.to_path_buf()));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(&lock_path)(e)),
        }
        let db_path = dir.join("state.db");
        let conn = Connection::open(&db_path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS objects (
                gr TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL,
                PRIMARY KEY (gr, ns, name));
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
             INSERT OR IGNORE INTO meta (key, value) VALUES ('rv', 0);",
        )?;
        for f in ["state.db", "state.db-wal", "state.db-shm"] {
            let p = dir.join(f);
            if p.exists() {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                    .map_err(io(&p))?;
            }
        }
        let rv: i64 =
            conn.query_row("SELECT value FROM meta WHERE key = 'rv'", [], |r| r.get(0))?;
        let mut rows = Vec::new();
        {
            let mut stmt = conn.prepare("SELECT gr, ns, name, data FROM objects")?;
            let mut q = stmt.query([])?;
            while let Some(r) = q.next()? {
                rows.push(Row {
                    gr: r.get(0)?,
                    ns: r.get(1)?,
                    name: r.get(2)?,
                    data: r.get(3)?,
                });
            }
        }
        let loaded = Loaded {
            rv: u64::try_from(rv).unwrap_or(0),
            rows,
        };
        Ok((Db { conn, _lock: lock }, loaded))
    }

    /// Store (insert or replace) one object and advance the counter, atomically.
    pub fn put(
        &mut self,
        gr: &str,
        ns: &str,
        name: &str,
        rv: u64,
        data: &[u8],
    ) -> Result<(), PersistError> {
        let tx = self.conn.transaction()?;
        tx.prepare_cached(
            "INSERT OR REPLACE INTO objects (gr, ns, name, data) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![gr, ns, name, data])?;
        tx.prepare_cached("UPDATE meta SET value = ?1 WHERE key = 'rv'")?
            .execute(params![rv as i64])?;
        tx.commit()?;
        Ok(())
    }

    /// Remove one object and advance the counter, atomically.
    pub fn delete(&mut self, gr: &str, ns: &str, name: &str, rv: u64) -> Result<(), PersistError> {
        let tx = self.conn.transaction()?;
        tx.prepare_cached("DELETE FROM objects WHERE gr = ?1 AND ns = ?2 AND name = ?3")?
            .execute(params![gr, ns, name])?;
        tx.prepare_cached("UPDATE meta SET value = ?1 WHERE key = 'rv'")?
            .execute(params![rv as i64])?;
        tx.commit()?;
        Ok(())
    }
}
