//! Integration tests of flemma-tools.

mod preview;
mod truncate;
