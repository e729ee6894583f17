//! Fuzzes the parser: any bytes parse without panicking, printing what was parsed is a fixed
//! point, and resuming an incremental parse gives the full parse.
//!
//! Run with a nightly toolchain: `cargo +nightly fuzz run parse` (from the repository root).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = flemma_ast::parse_bytes(data);
    let text = String::from_utf8_lossy(data);
    let doc = flemma_ast::parse(&text);
    let printed = flemma_ast::print(&doc);
    let reprinted = flemma_ast::print(&flemma_ast::parse(&printed));
    assert_eq!(printed, reprinted, "printing is not a fixed point");

    let half = (0..=text.len() / 2).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    let mut incremental = flemma_ast::IncrementalParser::new(&text[..half]);
    incremental.update(&text);
    assert_eq!(incremental.document(), &doc, "incremental parse differs from a full parse");
});
