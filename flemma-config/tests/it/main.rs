//! Integration tests of flemma-config.
