//! Integration tests of flemma-tools.

mod preview;
mod registry;
mod truncate;
