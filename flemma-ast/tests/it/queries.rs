//! Queries over a parsed document (spec §1.14).

use flemma_ast::{
    Segment, build_tool_sibling_table, build_tool_use_index, find_job_result, find_message_at_line,
    find_segment_at_position, find_tool_result_by_id, find_tool_sibling, find_tool_use_by_id,
    parse,
};
use pretty_assertions::assert_eq;

const TEXT: &str = "\
@You:
Run {{ cmd }} please.

@Assistant:
**Tool Use:** `bash` (`t1`)
```json
{\"command\":\"make\",\"label\":\"building\"}
```
**Tool Use:** `read` (`t2`)
```json
{\"path\":\"a.rs\",\"label\":3}
```

@You:
**Tool Result:** `t1` (job=job_abc)
```
Running as a background job.
```
**Tool Result:** `t1`
```
second result wins
```

@You:
**Job Result:** `job_abc`
```
done
```
";

#[test]
fn finds_tool_uses_results_and_jobs() {
    let doc = parse(TEXT);
    let found = find_tool_use_by_id(&doc, "t2").unwrap();
    assert_eq!(
        (
            found.node.name.as_str(),
            found.message_index,
            found.segment_index
        ),
        ("read", 1, 1)
    );
    assert!(find_tool_use_by_id(&doc, "nope").is_none());

    let first = find_tool_result_by_id(&doc, "t1").unwrap();
    assert_eq!(first.node.job_id(), Some("job_abc"));
    assert_eq!(first.node.span.start_line, 15);

    let job = find_job_result(&doc, "job_abc").unwrap();
    assert_eq!((job.node.content.as_str(), job.message_index), ("done", 3));
}

#[test]
fn siblings_go_both_ways_and_the_table_keeps_the_last_result() {
    let doc = parse(TEXT);
    let use_segment = find_tool_use_by_id(&doc, "t1").unwrap();
    let result =
        find_tool_sibling(&doc, &doc.messages[1].segments[use_segment.segment_index]).unwrap();
    assert!(
        matches!(result.node, Segment::ToolResult(r) if r.span.start_line == 15),
        "first result"
    );
    let back = find_tool_sibling(&doc, result.node).unwrap();
    assert!(matches!(back.node, Segment::ToolUse(u) if u.id == "t1"));

    let table = build_tool_sibling_table(&doc);
    let t1 = table["t1"];
    assert_eq!(t1.tool_result.unwrap().content, "second result wins");
    assert_eq!((t1.use_message, t1.result_message), (Some(1), Some(2)));
    let t2 = table["t2"];
    assert!(t2.tool_result.is_none());
}

#[test]
fn tool_use_index_has_names_and_string_labels() {
    let doc = parse(TEXT);
    let index = build_tool_use_index(&doc);
    assert_eq!(index["t1"].name.as_str(), "bash");
    assert_eq!(index["t1"].label, Some("building"));
    assert_eq!(index["t2"].label, None, "a non-string label is no label");
}

#[test]
fn positions_find_inline_segments_by_column_and_blocks_by_line() {
    let doc = parse(TEXT);
    let at = |line, col| find_segment_at_position(&doc, line, col).map(|s| s.node.clone());
    assert!(matches!(at(2, 1), Some(Segment::Text(t)) if t.value == "Run "));
    assert!(matches!(at(2, 5), Some(Segment::Expression(e)) if e.code == " cmd "));
    assert!(matches!(at(2, 13), Some(Segment::Expression(_))));
    assert!(matches!(at(2, 14), Some(Segment::Text(_))));
    assert!(matches!(at(7, 99), Some(Segment::ToolUse(u)) if u.id == "t1"));
    assert!(matches!(at(18, 1), Some(Segment::ToolResult(_))));
    assert_eq!(at(4, 1), None, "a marker line holds no segment");
}

#[test]
fn messages_are_found_by_line() {
    let doc = parse(&format!("preamble\n\n{TEXT}"));
    assert_eq!(find_message_at_line(&doc, 1), None);
    assert_eq!(find_message_at_line(&doc, 3).map(|(i, _)| i), Some(0));
    assert_eq!(
        find_message_at_line(&doc, 5).map(|(i, _)| i),
        Some(0),
        "trailing blank line"
    );
    assert_eq!(find_message_at_line(&doc, 6).map(|(i, _)| i), Some(1));
    assert_eq!(
        find_message_at_line(&doc, doc.line_count).map(|(i, _)| i),
        Some(3)
    );
    assert_eq!(find_message_at_line(&doc, doc.line_count + 1), None);
}
