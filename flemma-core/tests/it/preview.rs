//! Spec §12.10: previews of tool calls.

use flemma_core::preview::{Preview, generic_preview, render_preview};
use serde_json::json;

#[test]
fn generic_preview_is_inline_when_it_fits_and_block_otherwise() {
    let input = json!({"query": "search term", "limit": 10, "tags": ["a", "b"]});
    let inline = generic_preview(&input, 80);
    assert_eq!(
        inline.detail.as_deref(),
        Some(r#"{query: "search term", limit: 10, tags: ["a","b"]}"#)
    );
    assert_eq!(inline.label, None);
    let block = generic_preview(&input, 20);
    assert_eq!(
        block.detail.as_deref(),
        Some("query: \"search term\"\nlimit: 10\ntags: [\"a\",\"b\"]")
    );
}

#[test]
fn generic_preview_promotes_a_string_label_and_drops_harness_parameters() {
    let input =
        json!({"label": "finding it", "q": "x", "flemma.background": true, "flemma.save_to": null});
    let preview = generic_preview(&input, 80);
    assert_eq!(preview.label.as_deref(), Some("finding it"));
    assert_eq!(preview.detail.as_deref(), Some(r#"{q: "x"}"#));
    // A label that is not a string is an ordinary field.
    let preview = generic_preview(&json!({"label": 3}), 80);
    assert_eq!(
        (preview.label, preview.detail.as_deref()),
        (None, Some("{label: 3}"))
    );
    // Nothing at all.
    assert_eq!(generic_preview(&json!({}), 80), Preview::default());
}

#[test]
fn a_plain_string_preview_is_a_detail_only() {
    let preview = Preview::from("custom text");
    assert_eq!(render_preview("mine", &preview, 80), "mine: custom text");
}

#[test]
fn rendering_joins_parts_shows_line_breaks_and_cuts_the_detail_first() {
    let p = Preview::parts(["config.lua", "+100,50"]).with_label(Some("reading tail"));
    assert_eq!(
        render_preview("read", &p, 80),
        "read: config.lua  +100,50 — reading tail"
    );
    let p = Preview::detail("echo a\necho b\r\nok").with_label(Some("two\nlines"));
    assert_eq!(
        render_preview("bash", &p, 80),
        "bash: echo a↵echo b↵ok — two↵lines"
    );
    // 40 columns: the detail shrinks, the label stays whole.
    let p = Preview::detail("$ cargo test --workspace --all-features").with_label(Some("tests"));
    let line = render_preview("bash", &p, 40);
    assert_eq!(line, "bash: $ cargo test --workspace… — tests");
    assert_eq!(line.chars().count(), 39);
    // When the label alone is too long, it is cut too.
    let p = Preview::detail("x").with_label(Some("a very long label indeed"));
    assert_eq!(render_preview("t", &p, 12), "t: x — a ve…");
    // Label only, detail only, neither.
    assert_eq!(
        render_preview("t", &Preview::default().with_label(Some("l")), 80),
        "t: l"
    );
    assert_eq!(render_preview("t", &Preview::default(), 80), "t");
}
