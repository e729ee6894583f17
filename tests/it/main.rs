//! Integration tests of the facade.
