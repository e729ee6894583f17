//! The identifiers every flemma crate shares: [`ToolName`], [`ToolUseId`] and [`JobId`], the one
//! rule a tool name follows, and the wire codec that carries names to providers.
//!
//! A tool name is one or more segments of `[A-Za-z0-9_-]` joined by `.` (`bash`,
//! `flemma.jobs.status`, `mcp.fs.read_file`). Providers only accept `[A-Za-z0-9_-]`, so on the
//! wire each `.` becomes `__` ([`ToolName::to_wire`]); a name holding `__` itself would not come
//! back, and is refused. Transcripts written by older versions separate segments with `:`
//! (`slack:channels_list`): [`ToolName::read`] accepts them and marks them
//! [legacy](ToolName::is_legacy), so a host can [migrate](ToolName::migrated) them to `.`.
//!
//! Tool-use ids and job ids come from providers and from the harness in very different shapes
//! (`toolu_…`, `call_…`, `urn:flemma:tool:…`, `job_k7x2m9qa`); their only rule is that a
//! transcript header can carry them.
//!
//! All three types are cheap to clone (a shared string) and compare, hash and borrow as `str`,
//! so maps keyed by them can be queried with a `&str`.
//!
//! ```
//! use flemma_ids::{ToolName, ToolUseId};
//!
//! let name = ToolName::new("flemma.jobs.status")?;
//! assert_eq!(name.to_wire(), "flemma__jobs__status");
//! assert_eq!(ToolName::from_wire("flemma__jobs__status")?, name);
//!
//! let old = ToolName::read("slack:channels_list")?;
//! assert!(old.is_legacy());
//! assert_eq!(old.migrated(), "slack.channels_list");
//!
//! assert!(ToolName::new("a__b").is_err());
//! let id: ToolUseId = "toolu_01".parse()?;
//! assert_eq!(id, "toolu_01");
//! # Ok::<(), flemma_ids::InvalidId>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod chain;
mod error;
mod id;
mod name;
mod severity;
pub mod visible;
mod wire;

pub use chain::error_chain;
pub use error::InvalidId;
pub use id::{JobId, ToolUseId};
pub use name::ToolName;
pub use severity::Severity;
pub use wire::{decode_tool_name, encode_tool_name};
