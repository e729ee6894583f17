//! The tool system of flemma: what runs when a model asks for a tool.
//!
//! This crate is being built (issue #11 of the project): so far it holds output truncation
//! ([`truncate`], spec §10) and call previews ([`preview`], spec §12.10). The registry, the
//! execution context and the three-phase executor follow.
//!
//! ```
//! use flemma_tools::truncate::{Limits, truncate_tail};
//!
//! let out = truncate_tail("line 1\nline 2\nline 3", Limits { max_lines: 2, max_bytes: 1024 });
//! assert_eq!(out.content, "line 2\nline 3");
//! ```

pub mod preview;
pub mod truncate;
