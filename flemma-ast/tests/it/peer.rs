//! Every transcript in `shared/fixtures/peer/` parses to what a reader of the file expects.
//!
//! The expectations are written out by hand as an outline: one line per message and segment.
#![allow(
    clippy::needless_raw_string_hashes,
    reason = "one delimiter style for all outlines"
)]

use std::fmt::Write as _;

use flemma_ast::{Document, Segment, parse};
use pretty_assertions::assert_eq;

use crate::common::{check_spans, peer};

/// One line per message, segment and diagnostic.
pub(crate) fn outline(doc: &Document) -> String {
    let mut out = String::new();
    if let Some(fm) = &doc.frontmatter {
        writeln!(
            out,
            "frontmatter {} {:?} {}-{}",
            fm.language, fm.code, fm.span.start_line, fm.span.end_line
        )
        .unwrap();
    }
    for m in &doc.messages {
        writeln!(out, "@{} {}-{}", m.role, m.span.start_line, m.span.end_line).unwrap();
        for s in &m.segments {
            let lines = s
                .lines()
                .map(|l| format!(" {}-{}", l.start_line, l.end_line))
                .unwrap_or_default();
            let line = match s {
                Segment::Text(t) => format!("text {:?}", t.value),
                Segment::Expression(t) => format!("expression {:?}", t.code),
                Segment::Code(t) => format!("code {:?}", t.code),
                Segment::Thinking(t) => format!(
                    "thinking redacted={} signature={:?} {:?}",
                    t.redacted,
                    t.signature
                        .as_ref()
                        .map(|s| format!("{}:{}", s.provider, s.value)),
                    t.content
                ),
                Segment::ToolUse(t) => format!(
                    "tool_use {} ({}) {}",
                    t.name,
                    t.id,
                    serde_json::Value::Object(t.input().clone())
                ),
                Segment::ToolResult(t) => format!(
                    "tool_result {} status={:?} meta={} {:?}",
                    t.tool_use_id,
                    t.status,
                    serde_json::to_string(&t.meta).unwrap(),
                    t.content
                ),
                Segment::JobResult(t) => format!(
                    "job_result {} status={:?} {:?}",
                    t.job_id, t.status, t.content
                ),
                Segment::Aborted(a) => format!("aborted {:?}", a.message),
                Segment::Malformed(m) => format!("malformed {:?}", m.text),
                other => format!("{other:?}"),
            };
            writeln!(out, "  {line}{lines}").unwrap();
        }
    }
    for d in &doc.diagnostics {
        writeln!(
            out,
            "! line {} {} {}: {}",
            d.line,
            d.severity.as_str(),
            d.kind.as_str(),
            d.message
        )
        .unwrap();
    }
    out
}

fn check(name: &str, expected: &str) {
    let doc = parse(&peer(name));
    check_spans(&doc);
    assert_eq!(outline(&doc), expected, "{name}");
}

#[test]
fn every_peer_transcript_has_an_expectation() {
    let mut names: Vec<String> =
        std::fs::read_dir(crate::common::shared_dir().join("fixtures/peer"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| {
                std::path::Path::new(n)
                    .extension()
                    .is_some_and(|e| e == "chat")
            })
            .collect();
    names.sort();
    assert_eq!(
        names,
        EXPECTED
            .iter()
            .map(|(n, _)| (*n).to_owned())
            .collect::<Vec<_>>()
    );
}

#[test]
fn peer_transcripts_parse_as_a_reader_expects() {
    for (name, expected) in EXPECTED {
        check(name, expected);
    }
}

const EXPECTED: &[(&str, &str)] = &[
    (
        "conversation_malformed_tool_result.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "What is 15 multiplied by 7?" 5-5
@Assistant 7-17
  text "I'll calculate that for you.\n" 8-9
  tool_use calculator (toolu_01A09q90qw90lq917835lgs0) {"expression":"15 * 7"} 10-16
@You 18-26
  tool_result toolu_01A09q90qw90lq917835lgs0 status=None meta={} "{ \"result\": 105" 19-23
  text "\nThis is a malformed tool result - the JSON block is not closed.\nThe parser should emit a warning and treat this as plain text." 24-26
"##,
    ),
    (
        "conversation_nested_backticks.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a code generator tool." 2-2
@You 4-6
  text "Generate a simple Python hello world in markdown format." 5-5
@Assistant 7-19
  text "I'll generate that code for you.\n" 8-9
  tool_use generate_code (toolu_02XYZ123abc) {"language":"python","output_format":"markdown","template":"# Hello World\n\n```python\nprint('Hello, World!')\n```\n\nThis is a simple example."} 10-18
@You 20-29
  tool_result toolu_02XYZ123abc status=None meta={} "{\n  \"success\": true,\n  \"content\": \"# Hello World\\n\\n```python\\nprint('Hello, World!')\\n```\\n\\nThis is a simple example.\"\n}" 21-28
@Assistant 30-31
  text "Here's your Python hello world in markdown format!" 31-31
"##,
    ),
    (
        "conversation_parallel_incomplete.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "Calculate both 15*7 and 23*3 for me." 5-5
@Assistant 7-25
  text "I'll calculate both for you.\n" 8-9
  tool_use calculator (toolu_01AAA) {"expression":"15 * 7"} 10-16
  text "" 17-17
  tool_use calculator (toolu_01BBB) {"expression":"23 * 3"} 18-24
@You 26-31
  tool_result toolu_01AAA status=None meta={} "105" 27-31
"##,
    ),
    (
        "conversation_parallel_tools.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "I'm planning a party for 23 people. If each pizza has 8 slices and each person eats about 3 slices, how many pizzas should I order? Also, what's the cost if each pizza is $12?" 5-5
@Assistant 7-25
  text "Let me calculate both the number of slices needed and the total cost.\n" 8-9
  tool_use calculator (toolu_01AAA) {"expression":"23 * 3"} 10-16
  text "" 17-17
  tool_use calculator (toolu_01BBB) {"expression":"ceil(69 / 8)"} 18-24
@You 26-38
  tool_result toolu_01AAA status=None meta={} "69" 27-31
  text "" 32-32
  tool_result toolu_01BBB status=None meta={} "9" 33-37
@Assistant 39-49
  text "So you need 69 slices total (23 people x 3 slices each). Since each pizza has 8 slices, you'll need 9 pizzas. Now let me calculate the cost:\n" 40-41
  tool_use calculator (toolu_01CCC) {"expression":"9 * 12"} 42-48
@You 50-56
  tool_result toolu_01CCC status=None meta={} "108" 51-55
@Assistant 57-61
  text "Here's the breakdown:\n- Total slices needed: 69\n- Pizzas required: 9 (72 slices total, 3 spare)\n- Total cost: **$108**" 58-61
"##,
    ),
    (
        "conversation_tool_error.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "What is 1 divided by 0?" 5-5
@Assistant 7-17
  text "I'll try to calculate that for you.\n" 8-9
  tool_use calculator (toolu_01ERROR123) {"expression":"1 / 0"} 10-16
@You 18-24
  tool_result toolu_01ERROR123 status=Some(Error) meta={} "Division by zero is undefined" 19-23
@Assistant 25-26
  text "I apologize, but division by zero is undefined in mathematics. The expression 1/0 cannot be computed." 26-26
"##,
    ),
    (
        "conversation_tool_error_vertex.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "What is 1 divided by 0?" 5-5
@Assistant 7-17
  text "I'll try to calculate that for you.\n" 8-9
  tool_use calculator (urn:flemma:tool:calculator:error001) {"expression":"1 / 0"} 10-16
@You 18-24
  tool_result urn:flemma:tool:calculator:error001 status=Some(Error) meta={} "Division by zero is undefined" 19-23
@Assistant 25-26
  text "I apologize, but division by zero is undefined in mathematics. The expression 1/0 cannot be computed." 26-26
"##,
    ),
    (
        "conversation_tool_result_json.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "What is 15 multiplied by 7?" 5-5
@Assistant 7-17
  text "I'll calculate that for you.\n" 8-9
  tool_use calculator (toolu_01A09q90qw90lq917835lgs0) {"expression":"15 * 7"} 10-16
@You 18-26
  tool_result toolu_01A09q90qw90lq917835lgs0 status=None meta={} "{\n  \"result\": 105\n}" 19-25
@Assistant 27-28
  text "15 multiplied by 7 equals **105**." 28-28
"##,
    ),
    (
        "conversation_tool_result_plain_fenced.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to tools." 2-2
@You 4-6
  text "Run the command" 5-5
@Assistant 7-17
  text "I'll run that for you.\n" 8-9
  tool_use run_command (toolu_01PLAIN123) {"command":"ls -la"} 10-16
@You 18-25
  tool_result toolu_01PLAIN123 status=None meta={} "this is a result of a tool\nwith multiple lines" 19-24
@Assistant 26-27
  text "The command ran successfully." 27-27
"##,
    ),
    (
        "conversation_tool_result_with_followup.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "What is 15 multiplied by 7?" 5-5
@Assistant 7-17
  text "I'll calculate that for you.\n" 8-9
  tool_use calculator (call_abc123) {"expression":"15 * 7"} 10-16
@You 18-25
  tool_result call_abc123 status=None meta={} "105" 19-23
  text "\nThanks! Now what is 20 plus 30?" 24-25
"##,
    ),
    (
        "conversation_tool_result_yaml.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "What is 15 multiplied by 7?" 5-5
@Assistant 7-17
  text "I'll calculate that for you.\n" 8-9
  tool_use calculator (toolu_01A09q90qw90lq917835lgs0) {"expression":"15 * 7"} 10-16
@You 18-25
  tool_result toolu_01A09q90qw90lq917835lgs0 status=None meta={} "result: 105\ncomputed_at: \"2026-01-10T12:00:00Z\"" 19-24
@Assistant 26-27
  text "15 multiplied by 7 equals **105**." 27-27
"##,
    ),
    (
        "conversation_truncated_background_jobs.chat",
        r##"frontmatter lua "flemma.opt.tools:append(\"calculator_async\")\nflemma.opt.tools.auto_approve:append(\"calculator_async\")\nflemma.opt.tools.max_concurrent = 4" 1-5
@System 6-10
  text "You are maintaining Flemma.nvim.\n\nUse calculator_async for arithmetic. Run bash commands in the background when checking the repository." 7-9
@You 11-13
  text "In this Flemma.nvim checkout, calculate 2+2 and 4+4, then check the Lua module count and the current git branch." 12-12
@Assistant 14-44
  text "" 15-15
  tool_use calculator_async (toolu_calc_2_plus_2) {"delay":2000,"expression":"2 + 2"} 16-20
  text "" 21-21
  tool_use calculator_async (toolu_calc_4_plus_4) {"delay":2000,"expression":"4 + 4"} 22-26
  text "" 27-27
  tool_use bash (toolu_count_lua_modules) {"label":"counting Lua modules","command":"find lua/flemma -name '*.lua' | wc -l","background":true,"timeout":30} 28-32
  text "" 33-33
  tool_use bash (toolu_git_branch) {"label":"checking git branch","command":"git branch --show-current","background":true,"timeout":30} 34-38
  text "" 39-39
  thinking redacted=false signature=None "The user asked for two simple calculations and two repository checks.\nThe calculations can run in the foreground.\nThe repository checks can run as background bash jobs because the answer does not depend on them before continuing." 40-44
"##,
    ),
    (
        "conversation_with_anthropic_signature.chat",
        r##"@System 1-3
  text "You are helpful." 2-2
@You 4-6
  text "What is 2+2?" 5-5
@Assistant 7-13
  text "2 + 2 equals 4.\n" 8-9
  thinking redacted=false signature=Some("anthropic:Ev0BCkYICxgCKkCkOkORi2wMs5KFDBiwy70+9VIBgiNeHgdOjQZNw+NcoF3wkQlHMQdT3eTiUjmNtH+J1fOkPtYjoeEP6+uWKyE6Egygh+yCcODxTd0ezywaDEeyWZ3RcwIA5X5hpCIwJcQh9BsIF4iXFI6N2WvDHgX40yjzMf8Eu/NHZEaBDTJ58HoDjcw88Z+R/hwbgdYYKmXB5oT5Lzx4E2Y/CafnXqKaxhWtJadHDX2hHHqmzmx0sRikoV/ihbYCYc0HlTzMtjBg7rNSklsyvrFmR9Rfwb2o+1PI6YkX0Z0rJzGadRjiBCC4t5N65ZVz+zHt8Lgqfhg6FLaV2RgB") "This is a simple arithmetic question. 2+2 equals 4. I need to answer in one sentence." 10-12
@You 14-16
  text "And 3+3?" 15-15
"##,
    ),
    (
        "conversation_with_redacted_thinking.chat",
        r##"@System 1-3
  text "You are helpful." 2-2
@You 4-6
  text "What is 2+2?" 5-5
@Assistant 7-16
  text "The answer is 4.\n" 8-9
  thinking redacted=false signature=Some("anthropic:sig-abc123") "Let me verify." 10-12
  thinking redacted=true signature=None "encrypted-redacted-data-xyz789" 13-15
@You 17-18
  text "And 3+3?" 18-18
"##,
    ),
    (
        "conversation_with_thought_signature_vertex.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "What is 15 multiplied by 7?" 5-5
@Assistant 7-19
  text "I'll calculate that for you.\n" 8-9
  tool_use calculator (urn:flemma:tool:calculator:678a1b2c0001) {"expression":"15 * 7"} 10-14
  text "" 15-15
  thinking redacted=false signature=Some("vertex:test-thought-signature-abc123") "The user wants me to calculate 15 * 7. I'll use the calculator tool." 16-18
@You 20-26
  tool_result urn:flemma:tool:calculator:678a1b2c0001 status=None meta={} "105" 21-25
"##,
    ),
    (
        "conversation_with_tools.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool." 2-2
@You 4-6
  text "What is 15 multiplied by 7?" 5-5
@Assistant 7-17
  text "I'll calculate that for you.\n" 8-9
  tool_use calculator (toolu_01A09q90qw90lq917835lgs0) {"expression":"15 * 7"} 10-16
@You 18-24
  tool_result toolu_01A09q90qw90lq917835lgs0 status=None meta={} "105" 19-23
@Assistant 25-26
  text "15 multiplied by 7 equals **105**." 26-26
"##,
    ),
    (
        "conversation_with_tools_vertex.chat",
        r##"@System 1-3
  text "You are a helpful assistant with access to a calculator tool. When asked to perform calculations, use the calculator tool." 2-2
@You 4-6
  text "What is 15 multiplied by 7?" 5-5
@Assistant 7-15
  text "I will calculate that for you.\n" 8-9
  tool_use calculator (urn:flemma:tool:calculator:678a1b2c0001) {"expression":"15 * 7"} 10-14
@You 16-22
  tool_result urn:flemma:tool:calculator:678a1b2c0001 status=None meta={} "105" 17-21
@Assistant 23-24
  text "15 multiplied by 7 is 105." 24-24
"##,
    ),
    ("doc.chat", ""),
];
