//! How much a template may read.

/// How deep `include()` may nest.
pub(crate) const MAX_INCLUDE_DEPTH: usize = 32;

/// The largest file `include()` or an `@./file` reference reads (providers take far less).
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
