//! The tool result store of flemma: a durable home, beside the conversation, for the full
//! output of tools.
//!
//! Three things write here: truncation overflow (the full text of an output the model only
//! sees the end of), `flemma.save_to` redirects, and optional materialisation of every result.
//! Paths come from a template (`$chat` by default: `<chat dir>/.flemma/<chat name>/
//! <source>_<tool>_<id>.txt`) with ids escaped so that none can leave the directory. Writes are
//! atomic and locked: the old content or the new one, never a torn file, and with `version`
//! backups no run is ever lost, whatever the number of concurrent writers. The lock is the
//! target's directory itself, so no lock file is left in the store or in a user's project.
//! Writes block for two fsyncs; with the `tokio` feature, `Store::write_result_async`,
//! `materialize_async` and `save_to_async` run them on Tokio's blocking pool.
//!
//! ```
//! use flemma_store::{SaveOutcome, Store};
//! use flemma_ids::{ToolName, ToolUseId};
//!
//! let dir = std::env::temp_dir().join(format!("flemma-store-lib-{}", std::process::id()));
//! let chat = dir.join("notes.chat");
//! let options = flemma_config::Config::new().options()?.tools.store;
//! let store = Store::new(&options, Some(&chat), "1")?;
//!
//! let (id, name) = (ToolUseId::new("toolu_01")?, ToolName::new("bash")?);
//! let path = store.write_result(&id, Some(&name), "full output")?;
//! assert_eq!(path, dir.join(".flemma/notes.chat/tool_bash_toolu_01.txt"));
//!
//! match store.save_to("out/report.txt", "line 1\nline 2", None) {
//!     SaveOutcome::Saved { stub, .. } => assert!(stub.ends_with("— 13B, 2 lines]")),
//!     SaveOutcome::NotSaved { error, .. } => panic!("{error}"),
//! }
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod append;
mod body;
mod error;
mod path;
mod preview;
mod store;
mod write;
mod writes;

pub use append::{
    Appended, append_if_unchanged, rewrite_tail_if_unchanged, sync_data, try_append_if_unchanged,
    try_rewrite_tail_if_unchanged,
};
pub use body::ResultBody;
pub use error::StoreError;
pub use path::{
    CHAT_PRESET, MAX_FILE_NAME, PathFormat, PathInputs, ResultId, STATE_PRESET, Source,
    collapse_namespaces, dedupe_name, escape_id, expand_inline, flatten, shorten,
};
pub use preview::format_size;
pub use store::{EnvLookup, STORE_PATH_VAR, SaveOutcome, Store, WritablePaths};
pub use write::{
    AtomicWriter, BackupStrategy, NoBackup, Replaced, VersionBackup, replace_if_unchanged,
    try_replace_if_unchanged, write_atomic, write_atomic_metadata,
};
pub use writes::{FileWrites, StoreWrites};
