//! The crate's error type. Messages follow the Flemma plugin's wording: a message it writes as
//! `<message>: <err>` is the error's `Display` followed by its
//! [`source`](std::error::Error::source), which is not repeated in the `Display`.

use std::path::PathBuf;

/// What can go wrong when computing a store path or writing to the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A `$preset` path format that does not exist.
    #[error("Unknown store preset '{preset}' (known: $chat, $state)")]
    UnknownPreset {
        /// The preset as written.
        preset: String,
    },
    /// A preset in `unnamed_path_format`.
    #[error("Presets are not supported in unnamed_path_format (no chat file path to derive from)")]
    PresetInUnnamed,
    /// A template that does not render.
    #[error("Invalid store path format '{format}': {messages}")]
    InvalidFormat {
        /// The template.
        format: String,
        /// The template engine's messages joined by `; `.
        messages: String,
    },
    /// A backup strategy name that does not exist.
    #[error("Unknown backup strategy '{name}' (known: version)")]
    UnknownBackupStrategy {
        /// The name.
        name: String,
    },
    /// The parent directory could not be created.
    #[error("Failed to create directory '{}'", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The lock serialising the writers of a directory could not be taken; the write was
    /// aborted and the old file is intact.
    #[error("Failed to lock directory '{}' for writing", dir.display())]
    Lock {
        /// The directory (its fallback lock file when it cannot be locked itself).
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The backup failed; the write was aborted and the old file is intact.
    #[error("Backup failed for '{}'", path.display())]
    Backup {
        /// The file being replaced.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The temporary file could not be created.
    #[error("Failed to open '{}' for writing", path.display())]
    Open {
        /// The destination.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Writing, syncing or renaming failed; the previous file is intact.
    #[error("Failed to write '{}'", path.display())]
    Write {
        /// The destination.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A `flemma.save_to` destination that names a directory.
    #[error("save_to target '{}' is a directory — append a filename", dest.display())]
    SaveToDirectory {
        /// The destination.
        dest: PathBuf,
    },
    /// A `flemma.save_to` destination the sandbox does not let tools write.
    #[error("save_to destination '{}' is not writable under sandbox policy", dest.display())]
    NotWritable {
        /// The destination.
        dest: PathBuf,
    },
    /// A `flemma.save_to` destination that is the conversation's file or an options file the
    /// host loaded (`sandbox.policy.protect_conversation`).
    #[error("save_to destination '{}' is read-only for tools: it is the conversation's file, an options file or hook the host loaded, or the project's .git, .claude, flemma.toml or the store's bookkeeping (sandbox.policy.protect_conversation = false allows it)", dest.display())]
    ReadOnly {
        /// The destination.
        dest: PathBuf,
    },
}
