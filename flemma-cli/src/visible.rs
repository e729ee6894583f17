//! What reaches a terminal: the escaping of [`flemma::ids::visible`], the one rule every crate
//! uses for text from a model, a tool, an MCP server or a file.

pub(crate) use flemma::ids::visible::{line, text};
