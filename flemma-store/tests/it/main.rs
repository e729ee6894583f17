//! Integration tests of flemma-store.
