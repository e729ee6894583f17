//! Every recorded stream through the full decode path; the events and the `.chat` text
//! written are snapshotted.

use flemma_providers::{AnthropicDecoder, ResponseWriter, SseDecoder, StreamDecoder, StreamEvent};

use crate::peer;

/// Decodes a recording in one piece: the events and the `.chat` text the writer produces.
pub(crate) fn replay(bytes: &[u8], decoder: &mut dyn StreamDecoder) -> (Vec<StreamEvent>, String) {
    let mut sse = SseDecoder::new();
    let mut events = Vec::new();
    let raw: Vec<_> = sse.feed(bytes).into_iter().chain(sse.finish()).collect();
    for event in &raw {
        events.extend(decoder.decode(event));
    }
    events.extend(decoder.finish());
    let mut writer = ResponseWriter::new();
    let mut text: String = events.iter().map(|e| writer.apply(e)).collect();
    text.push_str(&writer.finish());
    (events, text)
}

fn snapshot(name: &str, decoder: &mut dyn StreamDecoder) {
    let (events, text) = replay(&peer(name), decoder);
    let stem = name.trim_end_matches(".txt");
    insta::assert_json_snapshot!(format!("{stem}__events"), events);
    insta::assert_snapshot!(format!("{stem}__chat"), text);
}

#[test]
fn anthropic_recordings() {
    for name in [
        "anthropic_empty_tool_input_streaming.txt",
        "anthropic_final_response_streaming.txt",
        "anthropic_hello_success_stream.txt",
        "anthropic_multi_tool_race_streaming.txt",
        "anthropic_redacted_thinking_streaming.txt",
        "anthropic_thinking_with_signature_streaming.txt",
        "anthropic_throttle_three_tools_streaming.txt",
        "anthropic_tool_use_streaming.txt",
        "anthropic_whitespace_before_thinking_stream.txt",
    ] {
        snapshot(name, &mut AnthropicDecoder::new());
    }
}

#[test]
fn a_stream_cut_mid_tool_call_writes_no_tool_use() {
    let bytes = peer("anthropic_tool_use_streaming.txt");
    let text = String::from_utf8(bytes).unwrap();
    let cut = text.find("event: content_block_stop").unwrap();
    let (events, written) = replay(&text.as_bytes()[..cut], &mut AnthropicDecoder::new());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::ToolCall { .. })),
        "{events:?}"
    );
    assert!(
        matches!(events.last(), Some(StreamEvent::Error { .. })),
        "{events:?}"
    );
    assert!(!written.contains("**Tool Use:**"), "{written}");
}

#[test]
fn empty_tool_input_is_an_empty_object() {
    let (events, text) = replay(
        &peer("anthropic_empty_tool_input_streaming.txt"),
        &mut AnthropicDecoder::new(),
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::ToolCall { arguments, .. } if arguments == "{}")),
        "{events:?}"
    );
    assert!(text.contains("```json\n{}\n```"), "{text}");
}

#[test]
fn openai_responses_recordings() {
    for name in [
        "openai_final_response_streaming.txt",
        "openai_hello_success_stream.txt",
        "openai_incomplete_stream.txt",
        "openai_reasoning_stream.txt",
        "openai_reasoning_tool_call_stream.txt",
        "openai_text_before_tool_streaming.txt",
        "openai_tool_use_streaming.txt",
    ] {
        snapshot(name, &mut flemma_providers::OpenAiResponsesDecoder::new());
    }
}

#[test]
fn chat_completions_recordings() {
    for name in [
        "chat_completions_hello_stream.txt",
        "chat_completions_thinking_stream.txt",
        "chat_completions_tool_call_stream.txt",
    ] {
        snapshot(name, &mut flemma_providers::ChatCompletionsDecoder::new());
    }
}

#[test]
fn vertex_recordings() {
    for name in [
        "vertex_final_response_streaming.txt",
        "vertex_function_call_streaming.txt",
        "vertex_function_call_with_thought_signature_streaming.txt",
        "vertex_text_before_function_streaming.txt",
    ] {
        // Synthetic ids are time-based; a fixed source keeps the snapshots stable.
        let mut decoder = flemma_providers::VertexDecoder::with_id_source(|name: &str| {
            format!("urn:flemma:tool:{name}:test0001")
        });
        snapshot(name, &mut decoder);
    }
}

#[test]
fn every_recording_has_a_decoder_here() {
    let covered = 9 + 7 + 3 + 4;
    assert_eq!(
        crate::stream_files().len(),
        covered,
        "a new recording needs a place in these tests"
    );
}
